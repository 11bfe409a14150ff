"""ACE on the embedded local model: a playbook of numbered bullets for the shipped 'sentiment' set.

The local model (llama.cpp in this process; it takes about a minute to load) answers with the playbook inside
ACE's generator instructions, and plays reflector and curator. Every delta is checked against the current
playbook on validation tasks before it is kept; the bullets' helpful / harmful counters are written to
``ace_state.json`` in the run directory.

    python examples/algorithms/ace_local.py --calls 60 [--async] [--online]
"""

from __future__ import annotations

import json

from recipe_example import SOLVE, call_recipe, local_solver, parser, report, run_dir

from agentgrad.algorithms.ace import ace, generator


def main() -> int:
    cli = parser(__doc__ or "", calls=60, seconds=600.0)
    cli.add_argument("--online", action="store_true", help="ACE's online mode (one pass) instead of offline")
    args = cli.parse_args()
    _, provider = local_solver(args)
    store = run_dir(args, "ace")
    result = call_recipe(ace, args, store=store, model=None, run=generator(provider, SOLVE), reflector=provider,
                         mode="online" if args.online else "offline", epochs=2, json_mode=True,
                         params={"temperature": 0.3, "max_tokens": 512})
    code = report(result, "playbook")
    state = store / "ace_state.json"
    if state.exists():
        print("counters (helpful, harmful):", json.loads(state.read_text())["counters"])
    return code


if __name__ == "__main__":
    raise SystemExit(main())

"""Reflexion on the embedded local model: lessons for the shipped 'arithmetic' set, learned from retries.

On a training question the local model (llama.cpp in this process; about a minute to load) answers with the
lessons; while its answer is wrong it writes a self-reflection and tries again with it, up to --trials tries. A
reflection after which a retry passed is proposed as a lesson and kept only if it helps on validation tasks.
Every attempt is written to ``reflexion_attempts.json`` in the run directory.

Reflexion's feedback is only "wrong", so it needs a task the model can do and sometimes gets wrong: arithmetic by
default. On a set with labels the model has never seen (sentiment's "positive"/"negative" with no instruction)
no reflection can find the label, no retry passes, and the run stops with a typed error saying so.

    python examples/algorithms/reflexion_local.py --calls 60 [--async] [--trials 3]
"""

from __future__ import annotations

import json

from recipe_example import call_recipe, local_solver, parser, report, run_dir

from agentgrad.algorithms.reflexion import reflexion


def main() -> int:
    cli = parser(__doc__ or "", task_set="arithmetic", calls=60, seconds=600.0)
    cli.add_argument("--trials", type=int, default=3, help="the most tries per training task")
    args = cli.parse_args()
    solver, provider = local_solver(args, max_tokens=96)  # a retry may explain before its answer
    store = run_dir(args, "reflexion")
    result = call_recipe(reflexion, args, store=store, model=None, run=solver, reflector=provider,
                         trials=args.trials, params={"temperature": 0.3, "max_tokens": 120})
    code = report(result, "lessons")
    attempts = store / "reflexion_attempts.json"
    if attempts.exists():
        rows = json.loads(attempts.read_text())
        print(f"{len(rows)} attempts; {sum(r['passed'] for r in rows)} passed")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

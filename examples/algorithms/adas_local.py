"""ADAS on the embedded local model (no key): a meta agent writes agents as Python programs, the sandbox runs them.

The local model is the meta agent: it reads the archive of programs found so far (code and fitness) and the
current best program's failures, writes a new program `run(task_input) -> str`, reflects on it, and debugs it when
it crashes in the sandbox. Each program is scored by the engine's gate and kept only if it beats the current one.
The program has no model of its own (the sandbox has no network), so pick a set a program can solve:
`arithmetic` ("What is 65 - 12?") by default. A 0.5B model writes weak programs; with OPENAI_*/ANTHROPIC_* set,
pass --model openai:<name> for a stronger meta agent.

    python examples/algorithms/adas_local.py [--set arithmetic] [--calls 60] [--seconds 900] [--async]
"""

from __future__ import annotations

from recipe_example import call_recipe, parser, report, run_dir

from agentgrad.algorithms.adas import adas


def main() -> int:
    cli = parser(__doc__ or "", task_set="arithmetic", calls=60, seconds=900.0)
    cli.add_argument("--reflections", type=int, default=0, help="self-reflection rounds (ADAS: 2; slow locally)")
    args = cli.parse_args()
    result = call_recipe(adas, args, store=run_dir(args, "adas"), eval_tasks=12, reflections=args.reflections,
                         debug_max=1, json_mode=True, params={"temperature": 0.7, "max_tokens": 900})
    return report(result, "learned program")


if __name__ == "__main__":
    raise SystemExit(main())

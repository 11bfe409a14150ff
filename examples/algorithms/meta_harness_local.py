"""Meta-Harness on the embedded local model: a harness searched from raw traces on the shipped 'sentiment' set.

The local model (llama.cpp in this process; it takes about a minute to load) answers each review with the harness
as its system prompt, and plays Meta-Harness's proposer: it reads earlier harnesses in full with their scores and
raw traces, states a hypothesis and writes a complete new harness. The harness is an L1 artifact: one candidate
is checked at a time, on the whole gate pool, before it lands. The archive is printed at the end.

    python examples/algorithms/meta_harness_local.py --calls 60 [--async]
"""

from __future__ import annotations

from recipe_example import evolve_method, local_solver, parser, report, run_dir

from agentgrad.algorithms.meta_harness import MetaHarnessAgent, harness, recipe


def main() -> int:
    cli = parser(__doc__ or "", calls=60, seconds=900.0)
    cli.add_argument("--harness", default="Answer with the label only.", help="the starting harness")
    cli.add_argument("--timeout", type=float, default=600.0, help="seconds one proposal may take (CPU model)")
    args = cli.parse_args()
    solver, provider = local_solver(args)
    method = recipe(solver, reflector=provider, json_mode=True, params={"temperature": 0.3, "max_tokens": 500})
    result = evolve_method(method, args, store=run_dir(args, "meta-harness"), timeout=args.timeout,
                           artifact=harness(args.harness))
    code = report(result, "harness")
    if isinstance(method.agent, MetaHarnessAgent):
        for entry in method.agent.archive.values():
            print(f"  {entry.name} ({entry.outcome}, built on {entry.base or '-'}): {entry.hypothesis[:90]}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())

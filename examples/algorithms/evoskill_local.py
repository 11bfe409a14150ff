"""EvoSkill on the embedded local model: skill folders learned from failures on the shipped 'sentiment' set.

The local model (llama.cpp in this process; it takes about a minute to load) answers each review with the skill
library as its system prompt, and plays EvoSkill's proposer (create or edit a skill, from a batch of failures)
and its skill writer (the folder). Every folder is checked against the current library on validation tasks
before it is kept; the frontier of skill libraries the recipe built on is printed at the end.

    python examples/algorithms/evoskill_local.py --calls 60 [--async]
"""

from __future__ import annotations

from recipe_example import evolve_method, local_solver, parser, report, run_dir

from agentgrad.algorithms.evoskill import EvoSkillAgent, recipe


def main() -> int:
    cli = parser(__doc__ or "", calls=60, seconds=900.0)
    cli.add_argument("--frontier", type=int, default=3, help="K, the frontier size")
    cli.add_argument("--timeout", type=float, default=600.0, help="seconds one proposal may take (CPU model)")
    args = cli.parse_args()
    solver, provider = local_solver(args)
    method = recipe(solver, reflector=provider, frontier=args.frontier, category="queue_name",
                    params={"temperature": 0.3, "max_tokens": 300})
    result = evolve_method(method, args, store=run_dir(args, "evoskill"), timeout=args.timeout)
    code = report(result, "skill library")
    if isinstance(method.agent, EvoSkillAgent):
        print("frontier:", [(m.label, round(m.score, 3)) for m in method.agent.frontier.members])
        print("feedback:", [(e.label, e.action, e.skill, e.outcome) for e in method.agent.feedback])
    return code


if __name__ == "__main__":
    raise SystemExit(main())

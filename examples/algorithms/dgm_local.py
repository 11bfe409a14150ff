"""DGM on the embedded local model (no key): an open-ended archive of programs, each child a code edit of its parent.

Each self-improvement draws a parent from the archive (likelier for a good score and for few children), shows the
local model the parent's code and a failure, asks for ONE improvement as an issue, then for search/replace edits
that implement it. The child runs in the sandbox (no network, resource limits); the engine's gate decides whether
it replaces the current program, and the archive keeps every child that ran. The program has no model of its own,
so pick a set a program can solve: `arithmetic` by default. With OPENAI_*/ANTHROPIC_* set, pass
--model openai:<name> for a stronger model.

    python examples/algorithms/dgm_local.py [--set arithmetic] [--calls 60] [--async]
"""

from __future__ import annotations

from recipe_example import call_recipe, parser, report, run_dir

from agentgrad.algorithms.dgm import dgm


def main() -> int:
    args = parser(__doc__ or "", task_set="arithmetic", calls=60).parse_args()
    result = call_recipe(dgm, args, store=run_dir(args, "dgm"), stage=6, eval_tasks=12, examples=2,
                         params={"temperature": 0.7, "max_tokens": 700})
    return report(result, "learned program")


if __name__ == "__main__":
    raise SystemExit(main())

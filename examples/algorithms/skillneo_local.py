"""SkillNEO on the embedded local model (no key): a served skill and an exploration lineage kept apart.

The local model both answers the shipped set's questions (with the skill as its system message) and, as the
optimizer, writes the new versions. A small model follows the recipe's reply format only part of the time (the
run counts the replies it cannot use), so expect small gains; with OPENAI_*/ANTHROPIC_* set, pass
--model openai:<name> for a stronger one.

    python examples/algorithms/skillneo_local.py [--set sentiment] [--calls 80] [--seconds 900] [--async]
"""

from __future__ import annotations

from recipe_example import parser, run_recipe

from agentgrad.algorithms.skillneo import skillneo


def main() -> int:
    args = parser(__doc__ or "", seconds=900.0).parse_args()
    return run_recipe(skillneo, args, name="skillneo", artifact="Answer with the label only.",
                      params={"max_tokens": 256})


if __name__ == "__main__":
    raise SystemExit(main())

"""Pipeline mode: three artifacts in a chain (extract -> solve -> format), blame by counterfactual replay.

A wrong final answer is blamed on the earliest stage that is still wrong when given a correct input (the task's
reference output of the stage before), and only that stage's artifact is edited. The reward credits the leading
stages that are right, so an upstream fix shows in the evidence before the whole chain is right. No model, no key.

    python examples/pipeline_demo.py [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Blame, Budget, evolve
from agentgrad.testing import pipeline_world as world


def fix(blame: Blame) -> str:
    print(f"  blamed {blame.stage}: given {blame.given!r}, gave {blame.produced!r}, expected {blame.expected!r}")
    return world.fix(blame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    args = parser.parse_args()
    pipeline = world.PIPELINE
    result = evolve(world.tasks(), pipeline.reward(world.score), run=pipeline.run, propose=pipeline.propose(fix),
                    artifact=world.library(),
                    budget=Budget(calls=600), workers=2, asynchronous=args.asynchronous,
                    store=Path(tempfile.mkdtemp(prefix="agentgrad-pipeline-")) / "run", seed=0)
    print(result.summary())
    for artifact_id, artifact in result.artifacts.items():
        print(f"{artifact_id}: {artifact.text.strip() or '(empty)'}")
    if not result.ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

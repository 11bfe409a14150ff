"""Section-parallel mode: four workers, each owning its own sections of one hot markdown artifact.

Each task names the section it exercises (``task.meta["section"]``); worker i rolls out only on the tasks of its
sections and may edit only those, so two workers' edits never conflict and need no rebase. A scripted agent (no
model, no key) reads the answer from its topic's section.

    python examples/sections_demo.py [--async]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Budget, RunConfig, Workers, evolve
from agentgrad.strategies import Sections
from agentgrad.testing import sections_world as world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="agentgrad-sections-")) / "run"
    config = RunConfig(workers=Workers(rollout=4), asynchronous=args.asynchronous, parallel="sections")
    result = evolve(world.tasks(), world.reward, run=world.run, propose=world.propose,
                    artifact="# Support playbook\n", strategy=Sections(), budget=Budget(calls=500), store=store,
                    seed=2, config=config)
    print(result.summary())
    print(f"conflicts: {sum(1 for d in result.decisions if d.outcome.value == 'conflict')}; "
          f"edits refused as outside their worker's sections: {result.counts.get('outside_section', 0)}")
    print(result.artifact.text)
    if not result.ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

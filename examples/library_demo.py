"""Evolve a system prompt, a skill and a verifier together, with a read-only policy the agent sees.

The agent (a scripted one: no model, no key) needs all three: facts in the skill, the reply format in the system
prompt, and a whitespace check in the verifier (layer L1: one change at a time, fully checked). Its proposer names
the artifact each edit is for, and asks for two at once when two are missing; such a change commits on both
artifacts in one transaction. Edits of the L0 policy are refused. At the end every artifact's history is printed.

    python examples/library_demo.py [--async] [--calls 400] [--store DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agentgrad import Budget, evolve
from agentgrad.testing.library_world import LibraryWorld


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    parser.add_argument("--calls", type=int, default=400, help="the call budget")
    parser.add_argument("--store", type=Path, default=None, help="the run directory (default: a new temp one)")
    args = parser.parse_args()
    world = LibraryWorld(seed=3)
    store = args.store or Path(tempfile.mkdtemp(prefix="agentgrad-library-")) / "run"
    result = evolve(world.tasks(), world.reward, run=world.run, propose=world.propose, artifact=world.library(),
                    budget=Budget(calls=args.calls), workers=4, asynchronous=args.asynchronous, store=store, seed=1)
    print(result.summary())
    for artifact_id, artifact in result.artifacts.items():
        versions = result.histories[artifact_id]
        print(f"\n== {artifact_id} ({artifact.kind.value}, layer {artifact.layer.value if artifact.layer else '?'}, "
              f"{len(versions) - 1} commits)\n{artifact.text.rstrip() or '(empty)'}")
    print(f"\nrun directory: {result.run_dir} (try: agentgrad show {result.run_dir} -a skill)")
    if not result.ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

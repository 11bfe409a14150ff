"""`make demo`: train the reference world's skill with the default optimizer and show every decision.

The reference world is simulated (no model, no key): tasks fall into hidden categories and the solver succeeds
when the skill holds the right rule for a task's category. Proposers return right rules, junk, contradictions and
duplicates. Watch the optimizer keep the right rules and explain why it dropped the rest.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from dulwich.refs import Ref
from dulwich.repo import Repo

from agentgrad.core.decision import Outcome
from agentgrad.optim.aggregator import Aggregator, StepResult
from agentgrad.optim.recipes import default
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.driver import WorldDriver
from agentgrad.testing.world import ReferenceWorld, WorldConfig


def show_step(round_no: int, result: StepResult) -> None:
    """Print the verdicts of one optimizer step."""
    if not result.decisions:
        return
    print(f"\nround {round_no}")
    for decision in result.decisions:
        mark = "+" if decision.outcome is Outcome.ACCEPTED else " "
        print(f" {mark} {decision.diff_id} {decision.outcome.value:<10} [{decision.stage}] {decision.reason}")


def show_git(run_dir: Path, limit: int = 3) -> None:
    """Print the last commits of the git mirror's dev branch."""
    repo = Repo(str(run_dir / "library.git"))
    walker = repo.get_walker(include=[repo.refs[Ref(b"refs/heads/dev")]], max_entries=limit)
    print(f"\nthe git mirror ({run_dir / 'library.git'}), last {limit} commits on dev:")
    for entry in walker:
        message = entry.commit.message.decode().strip().splitlines()
        print(f"  {entry.commit.id.decode()[:10]} {message[0]}")
        for line in message[1:4]:
            if line.strip():
                print(f"             {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/demo"))
    args = parser.parse_args()
    shutil.rmtree(args.run_dir, ignore_errors=True)
    world = ReferenceWorld(WorldConfig(seed=args.seed, tasks_per_category=24, noise=0.02, p_right=0.45,
                                       p_junk=0.2, p_contradict=0.2, p_duplicate=0.15))
    with SQLiteStore(args.run_dir) as store:
        driver = WorldDriver(world, store, Aggregator(default()), workers=args.workers, on_step=show_step)
        report = driver.run(args.rounds)
        final = store.artifact(world.artifact.id).text
        store.sync_git()
    print("\nlearned skill:\n" + "\n".join("  " + line for line in final.splitlines()))
    print(f"\nproposals by hidden kind: {dict(report.proposals)}")
    print(f"verdicts: {dict(report.outcomes)}; skipped as tabu before scoring: {report.skipped_tabu}")
    print(f"accepted edits by hidden kind: {dict(report.accepted_kinds)}")
    print(f"validation score: {report.val_before:.3f} -> {report.val_after:.3f}")
    print(f"held-out test score (never used for decisions): {report.test_before:.3f} -> {report.test_after:.3f}")
    show_git(args.run_dir)


if __name__ == "__main__":
    main()

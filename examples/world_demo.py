"""`make demo`: evolve the reference world's skill with the asynchronous runtime and explain every decision.

The reference world is simulated (no model, no key): tasks fall into hidden categories, and the solver succeeds
when the skill holds the right rule for a task's category. Its proposer returns right rules, junk, contradictions
and duplicates; every call takes a lognormal time (median 20 ms, σ = 1.5), like a model would. Watch the optimizer
keep the right rules, drop the rest, and say why; then compare the throughput with the limit the latency allows.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dulwich.refs import Ref
from dulwich.repo import Repo

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig


def show(kind: str, payload: Mapping[str, Any]) -> None:
    """A callback: print each verdict that ends an edit's life (gate screens are only counted)."""
    if kind != "decision" or payload["stage"] == "gate" or payload["outcome"] in ("recheck", "deferred"):
        return
    mark = "+" if payload["outcome"] in ("accepted", "fused") else " "
    print(f" {mark} {payload['diff_id']} {payload['outcome']:<10} [{payload['stage']}] {payload['reason'][:110]}")


class SlotMeter:
    """A callback: when each `run` call of the loop (rollouts and gate) held its slot, from the `call` events."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []  # (stage, start, end)

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "call" and payload["stage"] in ("rollouts", "gate_evals"):
            end = float(payload["end"])
            self.spans.append((str(payload["stage"]), end - float(payload["seconds"]), end))

    def busy(self, slots: int, until: float | None = None) -> float:
        """Share of `slots` busy from the first call to `until` (default: the last call's end)."""
        start = min(s for _, s, _ in self.spans)
        stop = max(e for _, _, e in self.spans) if until is None else until
        held = sum(max(0.0, min(e, stop) - s) for _, s, e in self.spans)
        return held / (slots * (stop - start))

    def report(self, slots: int) -> str:
        """Slot use over the loop, and while rollouts ran when the loop went on after them (draining gate checks)."""
        rollouts_end = max(e for stage, _, e in self.spans if stage == "rollouts")
        drain = max(e for _, _, e in self.spans) - rollouts_end
        line = f"slots busy: {self.busy(slots):.2f} of the loop's time"
        if drain > 0.05:
            line += (f"; {self.busy(slots, rollouts_end):.2f} while rollouts ran (then {drain:.1f} s of the last "
                     "gate checks, with few calls in flight)")
        return line


def show_git(run_dir: Path, limit: int = 3) -> None:
    """Print the last commits of the git mirror's dev branch."""
    repo = Repo(str(run_dir / "library.git"))
    walker = repo.get_walker(include=[repo.refs[Ref(b"refs/heads/dev")]], max_entries=limit)
    print(f"\nthe git mirror: git --git-dir {run_dir / 'library.git'} log -p dev   (last {limit} commits)")
    for entry in walker:
        lines = entry.commit.message.decode().strip().splitlines()
        print(f"  {entry.commit.id.decode()[:10]} {lines[0]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--slots", type=int, default=16)
    parser.add_argument("--median", type=float, default=0.02, help="median latency of a call, seconds")
    parser.add_argument("--sync", action="store_true", help="use the synchronous runtime")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/demo"))
    args = parser.parse_args()
    shutil.rmtree(args.run_dir, ignore_errors=True)
    world = ReferenceWorld(WorldConfig(seed=args.seed, tasks_per_category=40, noise=0.02, p_right=0.45,
                                       p_junk=0.2, p_contradict=0.2, p_duplicate=0.15))
    agent = WorldAgent(world, median=args.median, sigma=1.5)
    workers = Workers(rollout=args.slots, propose=args.slots // 2, gate=args.slots // 2, slots=args.slots)
    print(f"evolving {world.artifact.id} on {len(world.tasks)} tasks, {'sync' if args.sync else 'async'} runtime, "
          f"{args.slots} slots; verdicts as they happen (+ kept):")
    meter = SlotMeter()
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(rollouts=args.rollouts), workers=workers, asynchronous=not args.sync,
                    store=args.run_dir, seed=args.seed, callbacks=[show, meter])
    print("\nlearned skill:\n" + "\n".join("  " + line for line in result.rendered.splitlines()))
    print("\n" + result.summary())
    # the limit is slots / mean latency; a short run samples the heavy tail sparsely, so its calls' own mean
    # latency (not the distribution's, 1.5^2/2 in log space above the median) is the one that bounds it
    mean_latency = sum(e - s for _, s, e in meter.spans) / len(meter.spans)
    calls = result.usage.rollouts + result.usage.gate_evals
    rate = calls / result.usage.wall_time
    limit = args.slots / mean_latency
    print(f"throughput: {rate:.0f} run calls/s against a limit of {limit:.0f}/s ({args.slots} slots / "
          f"{1000 * mean_latency:.0f} ms, these calls' mean latency): efficiency {rate / limit:.2f}")
    print(meter.report(args.slots))
    show_git(args.run_dir)
    if not result.ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

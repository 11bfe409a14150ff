"""Runtime benchmarks (issue 3). Writes benchmarks/out/runtime_bench.json and runtime_bench.png.

On the reference world (20% junk proposals) with lognormal call latency (median 50 ms, σ = 1.5):
- throughput efficiency = slot utilisation: the time run calls held their slots ÷ (slots × wall time), counting a
  call cut off by the wall-time budget for the time it had run; with a fixed mean latency this is achieved calls/s ÷
  (slots ÷ mean latency), but it does not depend on how the heavy-tailed sample mean of a short run happens to fall.
  `completed_efficiency` counts completed calls only: under σ = 1.5 the calls in flight at the deadline have run
  ~0.7 s each on average (E[L²] / 2E[L]), so an 8 s run loses ~9% to the cut whatever the runtime does;
  for 1..256 slots, sync vs async;
- wall time and run calls to reach a target held-out reward: sync, async, and a synchronous GEPA-style loop
  written here (minibatch gate, one proposal per iteration);
- framework CPU per run call with an instant model, and the aggregator's share of wall time;
- junk rules committed.
`--quick` runs a smaller grid.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from agentgrad.core.diff import apply
from agentgrad.core.units import Scope, parse
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.base import make_diff
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig

OUT = Path(__file__).parent / "out"
MEDIAN, SIGMA = 0.05, 1.5
MEAN_LATENCY = MEDIAN * math.exp(SIGMA**2 / 2)
COUNTS = ("reverified", "rechecks", "futile_stops", "tasks_carried", "in_flight_duplicates", "screened_out",
          "rollout_workers_lowest", "decision_accepted", "decision_fused", "decision_rejected")


def world(seed: int = 0) -> ReferenceWorld:
    return ReferenceWorld(WorldConfig(seed=seed, n_categories=8, tasks_per_category=40, noise=0.01, p_right=0.45,
                                      p_junk=0.2, p_contradict=0.2, p_duplicate=0.15))


def junk(w: ReferenceWorld, text: str) -> int:
    return sum(1 for key in parse(Scope.KEY, text).keys() if key not in set(w.categories))  # noqa: SIM118


class TimedAgent(WorldAgent):
    """The world agent, also counting `cut`: the seconds run calls had held their slot when they were cancelled."""

    def __init__(self, w: ReferenceWorld, *, median: float, sigma: float) -> None:
        super().__init__(w, median=median, sigma=sigma)
        self.cut = 0.0

    async def run(self, rendered: str, task: Task) -> str:
        start = time.perf_counter()
        try:
            return await super().run(rendered, task)
        except BaseException:  # cancelled at the deadline: the slot was busy until now; the error goes on
            self.cut += time.perf_counter() - start
            raise

    def efficiency(self, slots: int, wall: float) -> dict[str, float]:
        """Slot utilisation with and without the calls cut off at the end."""
        return {"efficiency": (self.busy + self.cut) / (slots * wall),
                "completed_efficiency": self.busy / (slots * wall)}


class Timeline:
    """A callback recording when each version was committed."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.commits: list[tuple[float, int]] = []
        self.calls = 0

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "commit":
            self.commits.append((time.perf_counter() - self.start, int(payload["version"])))


def run(slots: int, *, asynchronous: bool, seconds: float, median: float = MEDIAN, seed: int = 0) -> dict[str, Any]:
    """One evolve run for `seconds` of wall time with `slots` concurrent run calls, on world `seed`."""
    w = world(seed)
    agent = TimedAgent(w, median=median, sigma=SIGMA)
    # async: the pools hold more work than the slots (the slot semaphore bounds the calls), weighted to rollouts
    # as in `make demo`; sync: every worker rolls out, proposes and is gated each round
    workers = Workers(rollout=max(1, slots), propose=max(1, slots // 2), gate=max(1, slots // 2), slots=slots) \
        if asynchronous else Workers(rollout=slots, propose=slots, gate=slots, slots=slots)
    timeline = Timeline()
    with tempfile.TemporaryDirectory() as tmp:
        cpu = time.process_time()
        splits = agent.splits()
        no_test = Splits(splits.train, splits.val, (), splits.protocol)  # scored offline below: no calls after the run
        result = evolve(no_test, agent.reward, agent=agent, strategy=w.strategy, artifact=w.artifact,
                        budget=Budget(wall_time=seconds), workers=workers, asynchronous=asynchronous,
                        store=Path(tmp) / "run", callbacks=[timeline])
        cpu = time.process_time() - cpu
        with SQLiteStore(Path(tmp) / "run", git=False) as store:
            texts = {v.number: v.text for v in store.history(w.artifact.id)}
    calls = result.usage.rollouts + result.usage.gate_evals
    wall = result.usage.wall_time
    reached = [(t, v) for t, v in timeline.commits if w.score(texts[v], "test") >= 0.75]
    return {"slots": slots, "mode": "async" if asynchronous else "sync", "calls": calls, "wall_time": wall,
            "calls_per_s": calls / wall, "limit_per_s": slots / MEAN_LATENCY if median else None,
            **(agent.efficiency(slots, wall) if median else {"efficiency": None}),
            "completed_calls": agent.completed, "sampled_mean_latency": agent.busy / max(1, agent.completed),
            "cpu_ms_per_call": 1000 * (cpu - 0.0) / max(1, calls + result.usage.test_evals),
            "aggregate_share": result.counts.get("aggregate_us", 0) / 1e6 / wall,
            "test_reward": w.score(result.artifact.text, "test"), "versions": len(result.history) - 1,
            "junk_rules": junk(w, result.artifact.text), "seconds_to_075": reached[0][0] if reached else None,
            "gate_share": result.usage.gate_share, "seed": seed,
            "counts": {k: result.counts.get(k, 0) for k in COUNTS}}


class GepaStyle:
    """A synchronous GEPA-style loop: minibatch rollouts, one reflection, minibatch gate, full validation."""

    def __init__(self, w: ReferenceWorld, slots: int, minibatch: int = 3) -> None:
        self.w, self.slots, self.minibatch = w, slots, minibatch
        self.agent = TimedAgent(w, median=MEDIAN, sigma=SIGMA)
        self.tasks = self.agent.splits()
        self.limiter = anyio.Semaphore(slots)
        self.calls = 0

    async def scores(self, text: str, ids: list[str]) -> dict[str, float]:
        out: dict[str, float] = {}

        async def one(task_id: str) -> None:
            async with self.limiter:
                task = self.w.tasks[task_id]
                output = await self.agent.run(text, Task(task_id, task.prompt))
                self.calls += 1
                out[task_id] = 1.0 if output == "solved" else 0.0
        async with anyio.create_task_group() as group:
            for task_id in ids:
                group.start_soon(one, task_id)
        return out

    async def loop(self, seconds: float) -> dict[str, Any]:
        rng = random.Random(0)
        text, start, reached = self.w.artifact.text, time.perf_counter(), None
        train, val = list(self.w.train), list(self.w.val)
        val_score = sum((await self.scores(text, val)).values())
        while time.perf_counter() - start < seconds:
            batch = rng.sample(train, self.minibatch)
            base = await self.scores(text, batch)
            failing = [t for t in batch if base[t] < 1.0]
            if not failing:
                continue
            proposal = self.w.propose(text, failing[0], rng.randrange(10**6)).text
            await anyio.sleep(self.agent.latency(failing[0], "propose:" + text))
            try:
                diff = make_diff(self.w.strategy, self.w.artifact.id, 0, text, proposal)
            except InvalidProposalError:
                continue
            if not diff.ops:
                continue
            candidate = apply(diff, text)
            if sum((await self.scores(candidate, batch)).values()) <= sum(base.values()):
                continue
            cand_val = sum((await self.scores(candidate, val)).values())
            if cand_val > val_score:
                text, val_score = candidate, cand_val
                if reached is None and self.w.score(text, "test") >= 0.75:
                    reached = time.perf_counter() - start
        wall = time.perf_counter() - start
        return {"mode": "gepa_style", "slots": self.slots, "calls": self.calls, "wall_time": wall,
                "calls_per_s": self.calls / wall, **self.agent.efficiency(self.slots, wall),
                "test_reward": self.w.score(text, "test"), "junk_rules": junk(self.w, text),
                "seconds_to_075": reached}


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    for mode, colour in (("sync", "tab:blue"), ("async", "tab:orange")):
        slots = [r["slots"] for r in rows if r["mode"] == mode]
        ax.plot(slots, [r["efficiency"] for r in rows if r["mode"] == mode], marker="o", color=colour, label=mode)
        ax.plot(slots, [r["completed_efficiency"] for r in rows if r["mode"] == mode], linestyle="--",
                color=colour, linewidth=1, label=f"{mode}, completed calls only")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("in-flight slots")
    ax.set_ylabel("slot utilisation (achieved / limit)")
    ax.set_ylim(0, 1.05)
    ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    ax.legend()
    ax.set_title("reference world, lognormal latency (median 50 ms, σ 1.5)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def _medians(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Median seconds to 0.75 per mode (a run that never reached it counts as infinitely slow)."""
    out: dict[str, float | None] = {}
    for mode in sorted({str(r["mode"]) for r in rows}):
        times = sorted(math.inf if r["seconds_to_075"] is None else float(r["seconds_to_075"])
                       for r in rows if r["mode"] == mode)
        middle = times[len(times) // 2]
        out[mode] = None if math.isinf(middle) else round(middle, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    sizes = [1, 4, 16, 64] if args.quick else [1, 4, 16, 64, 256]
    rows = [run(s, asynchronous=a, seconds=args.seconds) for s in sizes for a in (False, True)]
    seeds = range(1 if args.quick else 3)
    to_target = [run(16, asynchronous=a, seconds=args.seconds * 2, seed=seed) for seed in seeds for a in (False, True)]
    to_target += [anyio.run(GepaStyle(world(seed), 16).loop, args.seconds * 2) for seed in seeds]
    cpu = [run(s, asynchronous=True, seconds=3.0, median=0.0) for s in (16, 256)]
    results = {"mean_latency_s": MEAN_LATENCY, "throughput": rows, "to_target_075_at_16_slots": to_target,
               "to_target_median_seconds": _medians(to_target), "instant_model": cpu}
    OUT.mkdir(exist_ok=True)
    (OUT / "runtime_bench.json").write_text(json.dumps(results, indent=2))
    plotted = plot(rows, OUT / "runtime_bench.png")
    print(json.dumps(results, indent=2))
    print(f"wrote {OUT / 'runtime_bench.json'}" + (" and runtime_bench.png" if plotted else ""))


if __name__ == "__main__":
    main()

"""Runtime benchmarks (issue 3). Writes benchmarks/out/runtime_bench.json and runtime_bench.png.

On the reference world (20% junk proposals) with lognormal call latency (median 50 ms, σ = 1.5):
- throughput efficiency = slot utilisation: the time run calls held their slots ÷ (slots × wall time), counting a
  call cut off by the wall-time budget for the time it had run; with a fixed mean latency this is achieved calls/s ÷
  (slots ÷ mean latency), but it does not depend on how the heavy-tailed sample mean of a short run happens to fall.
  `completed_efficiency` counts completed calls only: under σ = 1.5 the calls in flight at the deadline have run
  ~0.7 s each on average (E[L²] / 2E[L]), so an 8 s run loses ~9% to the cut whatever the runtime does;
  `formula_efficiency` is the issue's formula, completed run calls/s ÷ (slots ÷ mean latency). With σ = 1.5 and
  short runs it is biased, and can exceed 1: the calls that complete before the deadline are the short ones (their
  sample mean latency is well under the true mean), while the long ones are cut and not counted; so it is
  reported beside the headline, not instead of it. All three for 1..256 slots, sync vs async;
- wall time and run calls to reach a target held-out reward (test ≥ 0.75): sync, async, and a synchronous
  GEPA-style loop written here (minibatch gate, one proposal per iteration). `calls_to_075` counts run calls
  (rollouts + gate evaluations) made up to the commit of the first version reaching the target, `rollouts_to_075`
  the rollouts among them; the summary gives the median of each per mode;
- framework CPU per run call with an instant model, and the aggregator's share of wall time;
- junk rules: `junk_rules` in the final text, `junk_committed` the distinct junk rules (by key) that were in any
  committed version (goal 0).
`--quick` runs a smaller grid.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
THROUGHPUT_CATEGORIES = 16  # the throughput grid's world: 16 rules to learn, still learning after 8 s at 256 slots
COUNTS = ("reverified", "rechecks", "futile_stops", "tasks_carried", "in_flight_duplicates", "screened_out",
          "rollout_workers_lowest", "decision_accepted", "decision_fused", "decision_rejected")


def world(seed: int = 0, categories: int = 8) -> ReferenceWorld:
    return ReferenceWorld(WorldConfig(seed=seed, n_categories=categories, tasks_per_category=40, noise=0.01,
                                      p_right=0.45, p_junk=0.2, p_contradict=0.2, p_duplicate=0.15))


RUN_STAGES = ("rollouts", "gate_evals")


def junk_keys(w: ReferenceWorld, text: str) -> set[str]:
    """The keys of the junk rules in `text` (keys that name no category of the world)."""
    categories = set(w.categories)
    return {key for key in parse(Scope.KEY, text).keys() if key not in categories}  # noqa: SIM118


def junk(w: ReferenceWorld, text: str) -> int:
    return sum(1 for key in parse(Scope.KEY, text).keys() if key not in set(w.categories))  # noqa: SIM118


def junk_committed(w: ReferenceWorld, texts: Iterable[str]) -> int:
    """How many distinct junk rules (by key) appeared in any of `texts` (every committed version)."""
    seen: set[str] = set()
    for text in texts:
        seen |= junk_keys(w, text)
    return len(seen)


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
        """Slot utilisation with and without the calls cut off at the end, and the issue's formula: completed
        run calls/s ÷ (slots ÷ mean latency), biased in short runs under σ = 1.5 (completed calls are the short
        ones; it can exceed 1, see the module doc)."""
        mean_latency = self.median * math.exp(self.sigma**2 / 2)
        return {"efficiency": (self.busy + self.cut) / (slots * wall),
                "completed_efficiency": self.busy / (slots * wall),
                "formula_efficiency": self.completed / wall / (slots / mean_latency)}


@dataclass(frozen=True)
class Commit:
    """One committed version: when (seconds from the start), which, and the run calls and rollouts made before."""

    seconds: float
    version: int
    calls: int
    rollouts: int


class Timeline:
    """A callback recording each commit with the run calls (rollouts + gate evaluations) reported before it.

    State: the start time, the commits so far, and running counts of run calls and rollouts."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.commits: list[Commit] = []
        self.calls = 0
        self.rollouts = 0

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "call" and payload["stage"] in RUN_STAGES:
            self.calls += 1
            self.rollouts += int(payload["stage"] == "rollouts")
        elif kind == "commit":
            self.commits.append(Commit(time.perf_counter() - self.start, int(payload["version"]), self.calls,
                                       self.rollouts))

    def to_target(self, w: ReferenceWorld, texts: Mapping[int, str], target: float = 0.75) -> dict[str, Any]:
        """Seconds, run calls and rollouts up to the first commit whose text scores ≥ `target` on test (None if
        no commit did)."""
        first = next((c for c in self.commits if w.score(texts[c.version], "test") >= target), None)
        return {"seconds_to_075": first.seconds if first else None, "calls_to_075": first.calls if first else None,
                "rollouts_to_075": first.rollouts if first else None}


def run(slots: int, *, asynchronous: bool, seconds: float, median: float = MEDIAN, seed: int = 0,
        categories: int = 8) -> dict[str, Any]:
    """One evolve run for `seconds` of wall time with `slots` concurrent run calls, on world `seed`."""
    w = world(seed, categories)
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
    target = timeline.to_target(w, texts)
    return {"slots": slots, "mode": "async" if asynchronous else "sync", "categories": categories, "calls": calls,
            "rollouts": result.usage.rollouts, "wall_time": wall,
            "calls_per_s": calls / wall, "limit_per_s": slots / MEAN_LATENCY if median else None,
            **(agent.efficiency(slots, wall) if median else {"efficiency": None}),
            "completed_calls": agent.completed, "sampled_mean_latency": agent.busy / max(1, agent.completed),
            "cpu_ms_per_call": 1000 * (cpu - 0.0) / max(1, calls + result.usage.test_evals),
            "aggregate_share": result.counts.get("aggregate_us", 0) / 1e6 / wall,
            "test_reward": w.score(result.artifact.text, "test"), "versions": len(result.history) - 1,
            "junk_rules": junk(w, result.artifact.text), "junk_committed": junk_committed(w, texts.values()),
            **target, "gate_share": result.usage.gate_share, "seed": seed,
            "counts": {k: result.counts.get(k, 0) for k in COUNTS}}


class GepaStyle:
    """A synchronous GEPA-style loop: minibatch rollouts, one reflection, minibatch gate, full validation.

    State: the run calls made (`calls`; minibatch rollouts count as `rollouts`, the minibatch gate and validation
    as gate evaluations), the junk rule keys of every accepted text, and the first time, calls and rollouts at
    which an accepted text reached test ≥ 0.75."""

    def __init__(self, w: ReferenceWorld, slots: int, minibatch: int = 3) -> None:
        self.w, self.slots, self.minibatch = w, slots, minibatch
        self.agent = TimedAgent(w, median=MEDIAN, sigma=SIGMA)
        self.tasks = self.agent.splits()
        self.limiter = anyio.Semaphore(slots)
        self.calls = 0
        self.rollouts = 0
        self.junk_seen: set[str] = set()
        self.reached: dict[str, Any] = {"seconds_to_075": None, "calls_to_075": None, "rollouts_to_075": None}

    async def scores(self, text: str, ids: list[str], *, rollouts: bool = False) -> dict[str, float]:
        """Run `text` on the tasks `ids` (at most `slots` at a time); `rollouts` counts them as rollouts."""
        out: dict[str, float] = {}

        async def one(task_id: str) -> None:
            async with self.limiter:
                task = self.w.tasks[task_id]
                output = await self.agent.run(text, Task(task_id, task.prompt))
                self.calls += 1
                self.rollouts += int(rollouts)
                out[task_id] = 1.0 if output == "solved" else 0.0
        async with anyio.create_task_group() as group:
            for task_id in ids:
                group.start_soon(one, task_id)
        return out

    async def candidate(self, text: str, train: list[str], rng: random.Random) -> str | None:
        """One iteration up to the minibatch gate: the reflected candidate if it beat `text` there, else None."""
        batch = rng.sample(train, self.minibatch)
        base = await self.scores(text, batch, rollouts=True)
        failing = [t for t in batch if base[t] < 1.0]
        if not failing:
            return None
        proposal = self.w.propose(text, failing[0], rng.randrange(10**6)).text
        await anyio.sleep(self.agent.latency(failing[0], "propose:" + text))
        try:
            diff = make_diff(self.w.strategy, self.w.artifact.id, 0, text, proposal)
        except InvalidProposalError:
            return None
        if not diff.ops:
            return None
        candidate = apply(diff, text)
        if sum((await self.scores(candidate, batch)).values()) <= sum(base.values()):
            return None
        return candidate

    def accept(self, text: str, seconds: float) -> None:
        """Record an accepted text: its junk rules, and whether it is the first to reach the target."""
        self.junk_seen |= junk_keys(self.w, text)
        if self.reached["seconds_to_075"] is None and self.w.score(text, "test") >= 0.75:
            self.reached = {"seconds_to_075": seconds, "calls_to_075": self.calls, "rollouts_to_075": self.rollouts}

    async def loop(self, seconds: float) -> dict[str, Any]:
        """Run for `seconds` of wall time (the iteration under way is finished) and report."""
        rng = random.Random(0)
        text, start = self.w.artifact.text, time.perf_counter()
        train, val = list(self.w.train), list(self.w.val)
        val_score = sum((await self.scores(text, val)).values())
        self.junk_seen |= junk_keys(self.w, text)
        while time.perf_counter() - start < seconds:
            candidate = await self.candidate(text, train, rng)
            if candidate is None:
                continue
            cand_val = sum((await self.scores(candidate, val)).values())
            if cand_val > val_score:
                text, val_score = candidate, cand_val
                self.accept(text, time.perf_counter() - start)
        wall = time.perf_counter() - start
        return {"mode": "gepa_style", "slots": self.slots, "calls": self.calls, "rollouts": self.rollouts,
                "wall_time": wall, "calls_per_s": self.calls / wall, **self.agent.efficiency(self.slots, wall),
                "test_reward": self.w.score(text, "test"), "junk_rules": junk(self.w, text),
                "junk_committed": len(self.junk_seen), **self.reached, "seed": self.w.config.seed}


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


def _medians(rows: list[dict[str, Any]], key: str = "seconds_to_075") -> dict[str, float | None]:
    """Median of `key` (seconds, calls or rollouts to 0.75) per mode; a run that never reached it counts as
    infinitely slow."""
    out: dict[str, float | None] = {}
    for mode in sorted({str(r["mode"]) for r in rows}):
        values = sorted(math.inf if r[key] is None else float(r[key]) for r in rows if r["mode"] == mode)
        middle = values[len(values) // 2]
        out[mode] = None if math.isinf(middle) else round(middle, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    sizes = [1, 4, 16, 64] if args.quick else [1, 4, 16, 64, 256]
    # a world the runtimes cannot finish within the window: a solved world leaves slots idle whatever the runtime
    rows = [run(s, asynchronous=a, seconds=args.seconds, categories=THROUGHPUT_CATEGORIES)
            for s in sizes for a in (False, True)]
    seeds = range(1 if args.quick else 3)
    to_target = [run(16, asynchronous=a, seconds=args.seconds * 2, seed=seed) for seed in seeds for a in (False, True)]
    to_target += [anyio.run(GepaStyle(world(seed), 16).loop, args.seconds * 2) for seed in seeds]
    cpu = [run(s, asynchronous=True, seconds=3.0, median=0.0) for s in (16, 256)]
    results = {"mean_latency_s": MEAN_LATENCY, "throughput": rows, "to_target_075_at_16_slots": to_target,
               "to_target_median_seconds": _medians(to_target),
               "to_target_median_calls": _medians(to_target, "calls_to_075"),
               "to_target_median_rollouts": _medians(to_target, "rollouts_to_075"), "instant_model": cpu}
    OUT.mkdir(exist_ok=True)
    (OUT / "runtime_bench.json").write_text(json.dumps(results, indent=2))
    plotted = plot(rows, OUT / "runtime_bench.png")
    print(json.dumps(results, indent=2))
    print(f"wrote {OUT / 'runtime_bench.json'}" + (" and runtime_bench.png" if plotted else ""))


if __name__ == "__main__":
    main()

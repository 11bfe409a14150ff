"""Local-model benchmark: the asynchronous runtime against a synchronous GEPA-style loop, same server, same budget.

One llama.cpp server (Qwen2.5-Coder-0.5B-Instruct by default) with `--slots` parallel slots serves both modes.
Each mode gets `--seconds` of wall time on a shipped set (default sentiment), from an empty skill, with the same
split, the same `LLMAgent` (solving at temperature 0, the one-rule proposer scaffold with llama.cpp's json_schema
grammar and seeded sampling) and the same scorer:

- async: `evolve()` with the asynchronous runtime (rollouts, proposals and gate evaluations overlap);
- gepa_style: GEPA's loop, one step at a time: score a minibatch of 3 training tasks, reflect on one failure,
  keep the candidate if it beats the base on the minibatch and then beats the best validation score.

Measured per mode: proposals per minute, model calls per second, output tokens per second, the share of
proposals that were valid rules, seconds per proposal call, the held-out test accuracy before and after, and when
the first improvement was kept. CPU timings are noisy when other processes share the machine. Writes
benchmarks/out/local_llm_bench.json and local_llm_bench.png. Needs ``pip install 'agentgrad[local]'``.
Run `python benchmarks/local_llm_bench.py --seconds 60` for a quicker pass.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from agentgrad.agents.llm import LLMAgent
from agentgrad.agents.skill import make_agent, scoring
from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.diff import apply
from agentgrad.data.shipped import load_set, recommended_scorer
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Completion, Message
from agentgrad.providers.local import LocalModel, local
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.evolve import evolve
from agentgrad.strategies.base import make_diff
from agentgrad.strategies.rules import AppendRules

OUT = Path(__file__).parent / "out"
SOLVE = {"temperature": 0.0, "max_tokens": 24}


@dataclass(frozen=True)
class Call:
    """One model call: when it started (perf_counter), how long it took, its output tokens, whether it proposed."""

    start: float
    seconds: float
    output_tokens: int
    proposal: bool


@dataclass
class Counted:
    """The local model, with every call recorded (proposal calls are those with the rule scaffold's json_schema).

    State: the calls made.
    """

    model: LocalModel
    name: str = "counted-local"
    calls: list[Call] = field(default_factory=list)

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        started = time.perf_counter()
        completion = await self.model.complete(messages, **params)
        self.calls.append(Call(started, time.perf_counter() - started, completion.usage.output_tokens,
                               "json_schema" in params))
        return completion


class GepaStyle:
    """GEPA's synchronous loop on an `LLMAgent`: minibatch rollouts, one reflection, minibatch check, full val.

    State: the current skill, its validation score, and counts of proposals (valid or not) and acceptances.
    """

    def __init__(self, agent: LLMAgent, splits: Splits, reward: Any, slots: int, seed: int, minibatch: int = 3):
        self.agent, self.splits, self.reward, self.minibatch = agent, splits, reward, minibatch
        self.limiter = anyio.Semaphore(slots)
        self.rng = random.Random(seed)
        self.strategy = AppendRules()
        self.proposals = self.valid = self.accepted = 0

    async def scores(self, text: str, tasks: Sequence[Task]) -> dict[str, tuple[float, str]]:
        """Reward and output of the skill `text` on `tasks`, as many at once as the slots allow."""
        out: dict[str, tuple[float, str]] = {}

        async def one(task: Task) -> None:
            async with self.limiter:
                output = (await self.agent.run(self.strategy.render(text), task)).text
            out[task.id] = (self.reward(task, output), output)

        async with anyio.create_task_group() as group:
            for task in tasks:
                group.start_soon(one, task)
        return out

    async def step(self, text: str, best: float) -> tuple[str, float]:
        """One GEPA iteration from skill `text` whose validation total is `best`."""
        batch = self.rng.sample(list(self.splits.train), self.minibatch)
        base = await self.scores(text, batch)
        failing = [t for t in batch if base[t.id][0] < 1.0]
        if not failing:
            return text, best
        task = failing[0]
        self.proposals += 1
        try:
            proposal = await self.agent.propose(self.strategy.render(text), task, base[task.id][1], base[task.id][0])
        except InvalidProposalError:
            return text, best
        self.valid += 1
        diff = make_diff(self.strategy, "skill", 0, text, proposal.text)
        if not diff.ops:
            return text, best
        candidate = apply(diff, text)
        if sum(s for s, _ in (await self.scores(candidate, batch)).values()) <= sum(s for s, _ in base.values()):
            return text, best
        score = sum(s for s, _ in (await self.scores(candidate, self.splits.val)).values())
        if score > best:
            self.accepted += 1
            return candidate, score
        return text, best

    async def loop(self, seconds: float) -> dict[str, Any]:
        start, text, first = time.perf_counter(), "", None
        best = sum(s for s, _ in (await self.scores(text, self.splits.val)).values())
        while time.perf_counter() - start < seconds:
            text, best = await self.step(text, best)
            if first is None and self.accepted:
                first = time.perf_counter() - start
        wall = time.perf_counter() - start
        before = await self.test_score("")
        after = await self.test_score(text)
        return {"wall_time": wall, "proposals": self.proposals, "valid_proposals": self.valid,
                "accepted": self.accepted, "first_kept_s": first, "test_before": before, "test_after": after,
                "skill": self.strategy.render(text)}

    async def test_score(self, text: str) -> float:
        scores = await self.scores(text, self.splits.test)
        return sum(s for s, _ in scores.values()) / len(scores)


def run_async(counted: Counted, splits: Splits, reward: Any, slots: int, seconds: float, seed: int) -> dict[str, Any]:
    agent = make_agent(counted, local=True, seed=seed, params=SOLVE)
    agent.remember(t.expected for t in splits.train[:agent.shown])
    first: list[float] = []
    start = time.perf_counter()

    def on_commit(kind: str, payload: Any) -> None:
        if kind == "commit" and not first:
            first.append(time.perf_counter() - start)

    with tempfile.TemporaryDirectory() as folder:
        result = evolve(splits, reward, agent=agent, strategy=AppendRules(), artifact=Artifact("skill", Kind.SKILL, ""),
                        budget=Budget(wall_time=seconds), seed=seed, store=Path(folder) / "run",
                        workers=Workers(rollout=2, propose=2, gate=2, slots=slots), callbacks=[on_commit])
    errors = result.counts.get("proposal_errors", 0)
    return {"wall_time": result.usage.wall_time, "proposals": result.usage.proposals,
            "valid_proposals": result.usage.proposals - errors, "accepted": len(result.accepted()),
            "first_kept_s": first[0] if first else None, "test_before": result.baseline_test_reward,
            "test_after": result.test_reward, "skill": result.rendered, "ok": result.ok}


def run_gepa(counted: Counted, splits: Splits, reward: Any, slots: int, seconds: float, seed: int) -> dict[str, Any]:
    agent = make_agent(counted, local=True, seed=seed, params=SOLVE)
    agent.remember(t.expected for t in splits.train[:agent.shown])
    return anyio.run(GepaStyle(agent, splits, reward, slots, seed).loop, seconds)


def measure(model: LocalModel, mode: str, splits: Splits, reward: Any, args: argparse.Namespace,
            seed: int) -> dict[str, Any]:
    """Run one mode and add the rates, counting only the calls started within its wall-time budget (the held-out
    test calls made after it are left out)."""
    counted = Counted(model)
    runner = run_async if mode == "async" else run_gepa
    start = time.perf_counter()
    row = runner(counted, splits, reward, args.slots, args.seconds, seed)
    wall, proposals = row["wall_time"], row["proposals"]
    calls = [c for c in counted.calls if c.start < start + wall]
    asked = [c.seconds for c in calls if c.proposal]
    row.update(mode=mode, seed=seed, calls=len(calls), proposals_per_min=round(60 * proposals / wall, 2),
               calls_per_s=round(len(calls) / wall, 2),
               output_tokens_per_s=round(sum(c.output_tokens for c in calls) / wall, 1),
               valid_share=round(row["valid_proposals"] / max(1, proposals), 3),
               seconds_per_proposal_call=round(sum(asked) / len(asked), 2) if asked else None)
    print(json.dumps({k: v for k, v in row.items() if k != "skill"}), flush=True)
    return row


def warm_up(model: LocalModel, splits: Splits) -> None:
    """A few proposal-shaped calls, so neither mode pays for the server's cold prompt cache alone."""
    agent = make_agent(model, local=True, seed=0, params=SOLVE)

    async def go() -> None:
        for task in splits.train[:2]:
            try:
                await agent.propose("", task, "I cannot tell.", 0.0)
            except InvalidProposalError:
                continue

    anyio.run(go)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Three panels per mode: proposals per minute, seconds to the first kept rule, held-out before -> after
    (bars are means over seeds, dots the seeds)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    modes = ["gepa_style", "async"]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    panels = [("proposals_per_min", "proposals per minute"), ("first_kept_s", "seconds to the first kept rule")]
    for ax, (key, label) in zip(axes, panels, strict=False):
        for i, mode in enumerate(modes):
            values = [float(r[key]) for r in rows if r["mode"] == mode and r[key] is not None]
            ax.bar(i, _mean(values), color=f"C{i}", alpha=0.6)
            ax.scatter([i] * len(values), values, color="black", s=12, zorder=3)
        ax.set_ylabel(label)
    right = axes[2]
    for i, mode in enumerate(modes):
        mine = [r for r in rows if r["mode"] == mode]
        before = _mean([r["test_before"] or 0.0 for r in mine])
        after = _mean([r["test_after"] or 0.0 for r in mine])
        right.bar([i - 0.2, i + 0.2], [before, after], width=0.38, color=["grey", f"C{i}"], alpha=0.7)
        right.text(i, after + 0.03, f"{before:.2f} -> {after:.2f}", ha="center")
    right.set_ylabel("held-out accuracy (grey: before)")
    right.set_ylim(0, 1.1)
    for ax in axes:
        ax.set_xticks(range(len(modes)), modes)
    fig.suptitle("local Qwen2.5-Coder-0.5B on 2 CPU cores: same server, slots and wall-time budget")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--set", default="sentiment")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG from the saved JSON")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads((OUT / "local_llm_bench.json").read_text())["rows"], OUT / "local_llm_bench.png")
        return
    reward = scoring(recommended_scorer(args.set))
    rows: list[dict[str, Any]] = []
    with local(args.model, n_parallel=args.slots) as model:
        for n, seed in enumerate(args.seeds):
            splits = split(load_set(args.set), seed=seed)
            warm_up(model, splits)
            order = ["gepa_style", "async"] if n % 2 == 0 else ["async", "gepa_style"]
            rows += [measure(model, mode, splits, reward, args, seed) for mode in order]
        load = model.stats.load_seconds
    OUT.mkdir(exist_ok=True)
    report = {"model": args.model, "set": args.set, "slots": args.slots, "seconds": args.seconds,
              "load_seconds": round(load, 2), "rows": rows}
    (OUT / "local_llm_bench.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(rows, OUT / "local_llm_bench.png")


if __name__ == "__main__":
    main()

"""What `evolve()` returns: the learned artifact, honest held-out numbers, usage, and why each diff went its way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgrad.core.artifact import Artifact, Version
from agentgrad.core.decision import Decision, Outcome
from agentgrad.runtime.budget import DEFAULT_BUDGET, Budget

if TYPE_CHECKING:
    from agentgrad.runtime.frontier import FrontierEntry  # its module reads the judge's constants (scipy)


@dataclass(frozen=True)
class RunUsage:
    """What a run spent. `gate_share` is the share of `run` calls the acceptance gate made.

    `wall_time` is the optimisation loop's time (what `Budget.wall_time` bounds, summed over resumes);
    `held_out_time` the seconds spent scoring the test split after it. `tokens` and `cost` include the held-out
    calls (the token and cost budgets cover them).
    """

    rollouts: int
    proposals: int
    gate_evals: int
    test_evals: int
    tokens: int
    cost: float
    wall_time: float
    cache_hits: int = 0
    gate_tasks_skipped: int = 0
    held_out_time: float = 0.0

    @property
    def run_calls(self) -> int:
        """The calls of `run` the loop made: rollouts and gate evaluations (what `Budget.calls` bounds)."""
        return self.rollouts + self.gate_evals

    @property
    def gate_share(self) -> float:
        return self.gate_evals / self.run_calls if self.run_calls else 0.0


@dataclass(frozen=True)
class Result:
    """The outcome of a run.

    Args:
        artifact: the learned artifact (head of the `dev` branch).
        rendered: what the agent sees with it (the strategy's rendering).
        test_reward: mean reward on the test split with the learned artifact (never used for any decision);
            None when the run had no test split.
        baseline_test_reward: the same for the starting artifact.
        protocol: how the tasks were split, and whether the held-out number is honest.
        history: every committed version.
        usage: what the run spent.
        counts: event counters (screened out, tabu skips, stragglers, run errors, ...).
        error: the exception that stopped the run, if any (the run then failed, loudly).
        run_dir: where the store, the event log and the git mirror live.
        budget: the limits the run was given (`DEFAULT_BUDGET` when `evolve` got none).
        artifacts: each learned artifact by id: the one artifact, or a library's members (then `artifact` is
            the packed library and `rendered` shows each member's rendered text under a ``=== id ===`` line).
        histories: each artifact's committed versions, by id.
        frontier: the examples that only changes the run did not commit won, and those changes, the most rows
            won first (`runtime.frontier`).
    """

    artifact: Artifact
    rendered: str
    test_reward: float | None
    baseline_test_reward: float | None
    protocol: str
    history: tuple[Version, ...]
    usage: RunUsage
    counts: Mapping[str, int]
    decisions: tuple[Decision, ...] = field(repr=False)
    run_dir: Path
    error: BaseException | None = None
    budget: Budget | None = None
    artifacts: Mapping[str, Artifact] = field(default_factory=dict)
    histories: Mapping[str, tuple[Version, ...]] = field(default_factory=dict, repr=False)
    frontier: tuple[FrontierEntry, ...] = field(default=(), repr=False)

    @property
    def ok(self) -> bool:
        """True when the run ended without an error."""
        return self.error is None

    def accepted(self) -> list[Decision]:
        """The verdicts that changed the artifact."""
        return [d for d in self.decisions if d.outcome is Outcome.ACCEPTED]

    def outcomes(self) -> list[dict[str, Any]]:
        """Why each diff was kept or not: its final verdict, the stage, the reason and the numbers."""
        last: dict[str, Decision] = {}
        for decision in self.decisions:
            last[decision.diff_id] = decision
        return [{"diff": d.diff_id, "outcome": d.outcome.value, "stage": d.stage, "reason": d.reason,
                 "numbers": dict(d.numbers), "parts": list(d.parts)} for d in last.values()]

    def _versions(self) -> str:
        if len(self.artifacts) <= 1:
            return f"{len(self.history) - 1} committed"
        parts = [f"{a} {len(self.histories.get(a, ())) - 1}" for a in sorted(self.artifacts)]
        return f"{len(self.history) - 1} library commits ({', '.join(parts)} per artifact)"

    def _stopped(self) -> str:
        """A line saying the run stopped before its budget because rollouts brought nothing more ("" if not)."""
        if not self.counts.get("idle_stops"):
            return ""
        calls = None if self.budget is None else self.budget.calls
        unused = "" if calls is None else \
            f"; {max(0, calls - self.usage.run_calls)} of its {calls} calls unused"
        idle = self.counts.get("idle_stop_rollouts", self.counts.get("idle_rollouts", 0))
        repeats = sum(self.counts.get(k, 0) for k in ("tabu_skips", "in_flight_duplicates", "no_op_proposals"))
        why = "the training tasks they ran pass on the head" + (
            f", or their proposals repeated changes already judged or changed nothing ({repeats} in the run)"
            if repeats else "")
        more = "add training tasks the agent fails" + (
            ", or validation tasks like the frontier's examples," if self.frontier else "")
        return f"stopped early: {idle} rollouts brought no proposal to judge ({why}: {more} to learn more){unused}\n"

    def _frontier(self) -> str:
        """A line naming the first examples only changes not committed won ("" if there are none)."""
        if not self.frontier:
            return ""
        shown = "; ".join(e.describe() for e in self.frontier[:3])
        more = f"; and {len(self.frontier) - 3} more (result.frontier)" if len(self.frontier) > 3 else ""
        return f"frontier: {len(self.frontier)} example(s) won only by changes not committed: {shown}{more}\n"

    def summary(self) -> str:
        """A few lines a person can read."""
        mix: dict[str, int] = {}
        for item in self.outcomes():
            mix[item["outcome"]] = mix.get(item["outcome"], 0) + 1
        held_out = "not measured" if self.test_reward is None else \
            f"{self.baseline_test_reward:.3f} -> {self.test_reward:.3f}"
        status = "ok" if self.ok else f"FAILED: {type(self.error).__name__}: {self.error}"
        budget = "" if self.budget is None else f"budget: {self.budget.describe()}" + (
            " (the default: pass budget= to change it)" if self.budget == DEFAULT_BUDGET else "") + "\n"
        return (f"run {status}\nheld-out reward ({self.protocol}): {held_out}\n{budget}{self._stopped()}"
                f"versions: {self._versions()}; verdicts: {mix}\n{self._frontier()}"
                f"usage: {self.usage.rollouts} rollouts, {self.usage.proposals} proposals, "
                f"{self.usage.gate_evals} gate evals ({self.usage.gate_share:.0%} of run calls), "
                f"{self.usage.wall_time:.1f} s" + (f" (+ {self.usage.held_out_time:.1f} s held-out scoring)"
                                                     if self.usage.held_out_time >= 0.05 else ""))

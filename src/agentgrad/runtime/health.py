"""Run health: per-example failures of the user's `run` are evidence; a run that only fails is a systemic fault.

A run whose first max(8, 2 × slots) calls all fail never worked (a wrong endpoint, a missing key); one that meets
max(32, 4 × slots) failures in a row after some calls succeeded hit an outage. Either stops the run with
`RunFailedError` naming the first error, instead of scoring zeros until a budget runs out. A run that ends (its
budget spent) before either threshold, with every call failed, stops the same way (`at_end`): nothing could have
been learned, so it must not report success. The calls of `propose` are watched the same way: a proposer that
never answers (a bug in it, a wrong reflector model) stops the run instead of spending the budget on rollouts.
"""

from __future__ import annotations

from collections import Counter

from agentgrad.errors import RunFailedError


class RunHealth:
    """Watches the outcomes of `run` calls.

    Args:
        slots: the run's concurrent `run` calls (the thresholds scale with it).
        counts: the run's counters; `run_ok` and `run_errors` are kept there (they are checkpointed with it).
    State: the first error of the run, and the current streak of failures with its first error.
    """

    def __init__(self, slots: int, counts: Counter[str]) -> None:
        self.counts = counts
        self.never_worked = max(8, 2 * slots)
        self.outage = max(32, 4 * slots)
        self.first_error: str | None = None
        self.streak = 0
        self.streak_error: str | None = None
        self.propose_streak = 0
        self.first_propose_error: str | None = None
        self.first_unusable: str | None = None  # why the first proposal that answered could not become a diff

    def unusable(self, reason: str) -> None:
        """A proposal answered but could not become a diff (invalid: it names no artifact, is garbage, ...)."""
        self.first_unusable = self.first_unusable or reason

    def proposed(self, error: str | None) -> None:
        """Record one `propose` call's outcome (`error` None: it answered); `RunFailedError` when the proposer
        never answered in its first calls, or stopped answering (the thresholds of `run`)."""
        if error is None:
            self.counts["propose_ok"] += 1
            self.propose_streak = 0
            return
        self.propose_streak += 1
        self.first_propose_error = self.first_propose_error or error
        if self.counts["propose_ok"] == 0 and self.propose_streak >= self.never_worked:
            raise RunFailedError(f"the first {self.propose_streak} calls of propose all failed; the first error "
                                 f"was: {self.first_propose_error}")
        if self.propose_streak >= self.outage:
            raise RunFailedError(f"the last {self.propose_streak} calls of propose all failed; the latest error "
                                 f"was: {error}")

    def observe(self, error: str | None) -> None:
        """Record one call's outcome (`error` None: it succeeded); `RunFailedError` when the run is broken."""
        if error is None:
            self.counts["run_ok"] += 1
            self.streak, self.streak_error = 0, None
            return
        self.counts["run_errors"] += 1
        self.streak += 1
        self.first_error = self.first_error or error
        self.streak_error = self.streak_error or error
        if self.counts["run_ok"] == 0 and self.counts["run_errors"] >= self.never_worked:
            raise RunFailedError(f"the first {self.counts['run_errors']} calls of run all failed; the first error "
                                 f"was: {self.first_error}")
        if self.streak >= self.outage:
            raise RunFailedError(f"the last {self.streak} calls of run all failed, after {self.counts['run_ok']} "
                                 f"that succeeded (an outage?); the first of them failed with: {self.streak_error}. "
                                 "Resume the run once the cause is fixed")

    def at_end(self) -> None:
        """`RunFailedError` if every call of `run` failed, every call of `propose` failed, or every proposal was
        unusable (invalid): nothing could have been learned."""
        if self.counts["run_ok"] == 0 and self.counts["run_errors"] > 0:
            raise RunFailedError(f"all {self.counts['run_errors']} calls of run failed; nothing could be learned. "
                                 f"The first error was: {self.first_error}")
        if self.counts["propose_ok"] == 0 and self.propose_streak > 0:
            raise RunFailedError(f"all {self.propose_streak} calls of propose failed; nothing could be learned. "
                                 f"The first error was: {self.first_propose_error}")
        if self.counts["proposals"] == 0 and self.counts["invalid_proposals"] > 0:
            raise RunFailedError(f"all {self.counts['invalid_proposals']} proposals were unusable, so nothing could "
                                 f"be learned. The first was refused because: {self.first_unusable}")

"""Run configuration: small frozen values that `evolve()` takes instead of dozens of keyword arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from agentgrad.core._checks import flag, integer, is_integer, is_number, member, number, one_of
from agentgrad.errors import ConfigError
from agentgrad.optim.acceptance import check_looks, look_delta
from agentgrad.optim.schedules import Schedule, delta_schedule
from agentgrad.optim.trust_region import TrustRegion
from agentgrad.runtime.gateconfig import GateConfig


class StalePolicy(str, Enum):
    """What happens to a diff whose base is too old to rebase (or whose rebase conflicts).

    KEEP: rebase whatever the lag (only a conflict drops it); DISCARD: drop it with its evidence kept;
    REPAIR: hand it to the `repair` callback, which re-anchors it on the current head; the result is re-checked.
    """

    KEEP = "keep"
    DISCARD = "discard"
    REPAIR = "repair"


@dataclass(frozen=True)
class Workers:
    """Concurrency per stage, each its own knob.

    Args:
        rollout: concurrent rollouts on training tasks.
        propose: concurrent `propose` calls.
        gate: candidates evaluated at once by the gate.
        slots: the most concurrent calls of the user's `run`, over rollouts and gate evaluations together
            (default: rollout + gate). `run` is never called with more concurrency than this.
        threads: at most this many threads inside synchronous user functions at once (a timed-out call's thread
            counts until it returns).
        adaptive: (asynchronous runtime) pause one rollout worker each time a proposal finds the gate's inbox
            full, resume one each time a gate worker finds it empty; `rollout` is then the most that run.
    """

    rollout: int = 4
    propose: int = 2
    gate: int = 2
    slots: int | None = None
    threads: int = 32
    adaptive: bool = True

    def __post_init__(self) -> None:
        for name in ("rollout", "propose", "gate", "threads"):
            integer(getattr(self, name), f"Workers.{name}", low=1)
        if self.slots is not None and not is_integer(self.slots, low=1):
            raise ConfigError(f"Workers.slots must be an int >= 1 or None, got {self.slots!r}")
        flag(self.adaptive, "Workers.adaptive")

    @property
    def run_slots(self) -> int:
        return self.slots if self.slots is not None else self.rollout + self.gate

    @classmethod
    def of(cls, value: int | Workers) -> Workers:
        """`Workers` from an int (that many rollout workers, and slots to match) or as given."""
        if isinstance(value, Workers):
            return value
        if not is_integer(value, low=1):
            raise ConfigError(f"workers must be an int >= 1 or a Workers value, got {value!r}")
        return cls(rollout=value, propose=max(1, value // 2), gate=max(1, value // 2))


@dataclass(frozen=True)
class Staleness:
    """How far workers may lag behind the head.

    Args:
        async_ratio: a worker refreshes its snapshot once the head is more than this many versions ahead.
        alpha_max: the most versions a diff may lag and still be rebased (on a cold artifact).
        policy: keep, discard or repair diffs that are too stale.
        repair: for REPAIR, `repair(diff_dict, head_text)` returning a new proposal for the current head.
    """

    async_ratio: int = 0
    alpha_max: int = 4
    policy: StalePolicy = StalePolicy.DISCARD
    repair: Callable[..., Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", member(self.policy, "Staleness.policy", StalePolicy))
        if not all(is_integer(v, low=0) for v in (self.async_ratio, self.alpha_max)):
            raise ConfigError(f"async_ratio and alpha_max must be >= 0, got {self.async_ratio}, {self.alpha_max}")
        if self.policy is StalePolicy.REPAIR and self.repair is None:
            raise ConfigError("Staleness(policy='repair') needs a repair callback")
        if self.repair is not None and not callable(self.repair):
            raise ConfigError(f"Staleness.repair must be a function (diff_dict, head_text) -> proposal, "
                              f"got {type(self.repair).__name__}")


RULES = ("sign", "mean")


@dataclass(frozen=True)
class Acceptance:
    """The acceptance rule: commit only if P(improvement > margin) > 1 − δ (the exact sign test), δ split over
    the looks at a candidate's evidence (`optim.acceptance`).

    Args:
        delta, margin: the risk and the minimum effect.
        looks: the most looks one candidate's evidence gets; a promising one is held for more tasks between them.
        first_share: the share of δ spent on the first look.
        promise: P(gain > 0) from which a candidate that fails a look is held for another.
        rule: "sign" (the test above) or "mean": commit when the candidate's mean score on its evidence beats the
            head's by more than `margin`, with no significance test (`optim.improvement`: the published GEPA
            loop's admission; no guard against answer noise; delta, looks, first_share and promise are unused).
            The mean is decided on the whole plan, so it needs `GateConfig(early_stop=False)` (which turns
            futility off too).
        renew: a change rejected for want of significance with no harm, or for harm the first time, may be tried
            again once the head has moved this many versions on (`optim.tabu`; None: never).
    """

    delta: float | Schedule = 0.05
    margin: float = 0.02
    looks: int = 2
    first_share: float = 0.7
    promise: float = 0.8
    rule: str = "sign"
    renew: int | None = 1

    def __post_init__(self) -> None:
        check_looks(self.looks, self.first_share, self.promise)
        if self.renew is not None:
            integer(self.renew, "Acceptance.renew", low=1)
        one_of(self.rule, "Acceptance.rule", RULES)
        number(self.margin, "Acceptance.margin", low=0.0, below=1.0)
        delta_schedule(self.delta)  # the check evolve() makes, made when the value is built

    def look_delta(self, delta: float, look: int) -> float:
        """The δ look number `look` is tested at, from the head's δ."""
        return look_delta(delta, look, looks=self.looks, first_share=self.first_share)


PARALLEL_MODES = ("data", "sections")


@dataclass(frozen=True)
class RunConfig:
    """Everything about how a run spends its budget, apart from the budget itself.

    Args:
        workers, staleness, gate, acceptance, trust_region: see those classes (a diff outside the trust region
            is refused before any evaluation is spent on it).
        timeout: seconds a call of a user function may take.
        asynchronous: the barrier-free runtime (True) or synchronous rounds (False).
        seed: seeds task order, splits and the gate's task order.
        max_batch: the most candidates one optimizer step takes.
        promote_every: confirm dev on the whole validation split and promote it to stable every this many
            commits (0: never).
        fuse_wait: seconds the asynchronous aggregator waits for candidates it sent back for a re-check, so that
            they reach one step and can fuse (None: four mean call durations; 0: never wait).
        hedge: in the asynchronous runtime, a gate call still running this many times its task's expected
            duration gets a twin call; the first answer wins and the other is cancelled (and charged). None or 0:
            never (`runtime.hedge`).
        inline_reward: a plain (non-async) reward that proves fast (16 calls in a row under 0.5 ms) runs on the
            event loop instead of a thread; one inline call over 5 ms sends it back to threads for good
            (`runtime.fastpath`). False keeps every call in a thread.
        reuse_outputs: a rollout of a head on a task the gate already ran that head on takes that run's output
            instead of calling `run` again (each kept output once; `Result.counts["reused_rollouts"]`). False:
            every rollout calls `run` (for an agent whose answers are samples worth drawing afresh).
        parallel: "data" (every worker may edit anything; edits are rebased and fused) or "sections" (each
            rollout worker owns disjoint sections of the artifact, named by its tasks' ``meta["section"]``, so its
            edits cannot conflict with another's: `runtime.sections`).
    """

    workers: Workers = field(default_factory=Workers)
    staleness: Staleness = field(default_factory=Staleness)
    gate: GateConfig = field(default_factory=GateConfig)
    acceptance: Acceptance = field(default_factory=Acceptance)
    trust_region: TrustRegion = field(default_factory=TrustRegion)
    timeout: float = 120.0
    asynchronous: bool = True
    seed: int = 0
    max_batch: int = 16
    promote_every: int = 3
    fuse_wait: float | None = None
    hedge: float | None = 4.0
    inline_reward: bool = True
    reuse_outputs: bool = True
    parallel: str = "data"

    def __post_init__(self) -> None:
        for name, kind in (("workers", Workers), ("staleness", Staleness), ("gate", GateConfig),
                           ("acceptance", Acceptance), ("trust_region", TrustRegion)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                hint = " (Workers.of(n) for a count)" if kind is Workers else ""
                article = "an" if kind.__name__[0] in "AEIOU" else "a"
                raise ConfigError(f"RunConfig.{name} must be {article} {kind.__name__}{hint}, got "
                                  f"{type(value).__name__}")
        if self.acceptance.rule == "mean" and self.gate.early_stop:
            raise ConfigError("Acceptance(rule='mean') decides on the mean over a candidate's whole plan, so the gate "
                              "may not stop early: use GateConfig(early_stop=False)")
        if self.parallel not in PARALLEL_MODES:
            raise ConfigError(f"RunConfig.parallel must be one of {list(PARALLEL_MODES)}, got {self.parallel!r}")
        timeout = self.timeout
        if not is_number(timeout, above=0):
            raise ConfigError(f"RunConfig.timeout must be a finite number of seconds > 0, got {timeout!r}")
        wait = self.fuse_wait
        if wait is not None and not is_number(wait, low=0):
            raise ConfigError(f"RunConfig.fuse_wait must be None or a finite number of seconds >= 0, got {wait!r}")
        for name in ("asynchronous", "inline_reward", "reuse_outputs"):
            flag(getattr(self, name), f"RunConfig.{name}")
        hedge = self.hedge
        if hedge is not None and not is_number(hedge, low=0):
            raise ConfigError(f"RunConfig.hedge must be None or a finite factor >= 0, got {hedge!r}")
        for name, low in (("seed", None), ("max_batch", 1), ("promote_every", 0)):
            integer(getattr(self, name), f"RunConfig.{name}", low=low)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description, stored with the run."""
        w, s, g, a = self.workers, self.staleness, self.gate, self.acceptance
        delta = a.delta if isinstance(a.delta, float) else a.delta.to_dict()
        return {"workers": {"rollout": w.rollout, "propose": w.propose, "gate": w.gate, "slots": w.run_slots,
                            "adaptive": w.adaptive},
                "staleness": {"async_ratio": s.async_ratio, "alpha_max": s.alpha_max, "policy": s.policy.value},
                "gate": {"chunk": g.chunk, "screen": g.screen, "screen_tasks": g.screen_tasks,
                         "early_stop": g.early_stop,
                         "max_examples": g.max_examples, "focus": g.focus, "pool": g.pool, "small": g.small},
                "acceptance": {"delta": delta, "margin": a.margin, "looks": a.looks, "first_share": a.first_share,
                               "promise": a.promise, "rule": a.rule, "renew": a.renew},
                "trust_region": {"max_ops": self.trust_region.max_ops, "max_chars": self.trust_region.max_chars},
                "timeout": self.timeout,
                "asynchronous": self.asynchronous, "seed": self.seed, "max_batch": self.max_batch,
                "promote_every": self.promote_every, "fuse_wait": self.fuse_wait,
                "hedge": self.hedge, "inline_reward": self.inline_reward, "reuse_outputs": self.reuse_outputs,
                "parallel": self.parallel}

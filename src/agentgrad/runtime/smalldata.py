"""Say it when the data is too small: the least evidence a commit needs, against what the gate can ever gather.

The acceptance rule needs some least number of wins with no loss before it commits anything: the sign test's
(`PassThresholds`), or fewer for the noise-calibrated test (`optim.judge`) at the noise prior.
A candidate can be scored on at most the tasks of its plan: the gate's pool (the validation split, or with
training tasks too when that is small; the origin task is never among them) cut at `GateConfig.max_examples`.
When even that can never hold enough wins, no change could ever be committed, and a run would spend its whole
budget for nothing: the run is refused at once with `DataTooSmallError`, naming the smallest split that would work
and what to change. When the pool takes training tasks, the run's protocol says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentgrad.errors import DataTooSmallError
from agentgrad.optim.futility import PassThresholds
from agentgrad.optim.judge import wins_needed
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.runtime.gateconfig import GateConfig


@dataclass(frozen=True)
class GatePower:
    """What the gate can gather for one candidate, and what the rule needs.

    Args:
        need: the least wins (with no loss) the acceptance rule commits on.
        most: the most tasks one candidate can be scored on.
        widened: the pool takes training tasks beside the validation split.
        n_val, n_train: split sizes.
    """

    need: int
    most: int
    widened: bool
    n_val: int
    n_train: int

    def protocol(self) -> str:
        """The note for the run's protocol ("" when the gate uses the validation split alone)."""
        if not self.widened:
            return ""
        return (f"; gate evidence from the validation and training tasks together ({self.n_val} + {self.n_train}, "
                "the origin task of each proposal left out), as the validation split alone is small; rollouts "
                "take validation tasks once no training task is left to learn from; promotion to stable is "
                "confirmed on the validation split")


def least_wins(most: int, *, delta: float, margin: float, prior: tuple[float, float]) -> int:
    """The least wins with no loss that can commit a change scored on `most` tasks: the sign test's, or the
    calibrated test's at the noise prior (before the run has measured any noise) when that needs fewer."""
    sign = PassThresholds(delta=delta, margin=margin, prior=prior).need(0)
    calibrated = wins_needed(most, delta=delta, margin=margin, noise=NoiseEstimate(), prior=prior, calibrated=True)
    return sign if calibrated is None else min(sign, calibrated)


def gate_power(*, n_val: int, n_train: int, gate: GateConfig, delta: float, margin: float,
               prior: tuple[float, float], rule: str = "sign") -> GatePower:
    """The `GatePower` of a run; `DataTooSmallError` if no change could ever be committed. With `rule="mean"`
    (`optim.improvement`) one win commits."""
    widened = gate.widened(n_val) and n_train > 0
    pool = n_val + (max(0, n_train - 1) if widened else 0)
    most = pool if gate.max_examples is None else min(pool, gate.max_examples)
    need = 1 if rule == "mean" else least_wins(most, delta=delta, margin=margin, prior=prior)
    if most >= need:
        return GatePower(need, most, widened, n_val, n_train)
    pool_need = 1 if rule == "mean" else \
        next(n for n in range(1, need + 1) if least_wins(n, delta=delta, margin=margin, prior=prior) <= n)
    rule = (f"the acceptance rule (delta={delta:g}, margin={margin:g}) needs at least {pool_need} tasks, each a "
            "win, to commit a change")
    if gate.max_examples is not None and gate.max_examples < pool_need <= pool:
        fix = f"set GateConfig(max_examples=) to at least {pool_need}"
    elif widened or (gate.pool != "val" and gate.widened(n_val)):
        more = pool_need - pool
        fix = (f"add at least {more} validation task(s) or {more + (0 if widened else 1)} training task(s) (the "
               "gate scores validation and training tasks, each proposal's origin left out), or use a larger delta")
    elif gate.pool == "val":
        fix = (f"use at least {pool_need} validation tasks, or GateConfig(pool='train+val') to draw gate evidence "
               "from training tasks too, or a larger delta")
    else:
        fix = f"use at least {pool_need} validation tasks, or a larger delta"
    raise DataTooSmallError(f"too little data: a candidate can be scored on at most {most} task(s) ({n_val} "
                            f"validation, {n_train} training), but {rule}, so no change could ever be committed; "
                            f"{fix}")

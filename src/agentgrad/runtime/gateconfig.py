"""`GateConfig`: how the acceptance gate (`runtime.gate`) spends its evaluations."""

from __future__ import annotations

from dataclasses import dataclass

from agentgrad.core._checks import flag, integer, is_number
from agentgrad.errors import ConfigError

POOLS = ("auto", "val", "train+val")


@dataclass(frozen=True)
class GateConfig:
    """How the gate spends evaluations.

    Args:
        chunk: tasks scored between two looks at the evidence.
        screen: first try the candidate on the training task it was proposed for.
        screen_tasks: the screen's minibatch: the origin task and this many minus one other training tasks (a
            seeded sample per diff, the base scored there too); the candidate passes when its sum there beats the
            base's (GEPA's minibatch test is 3).
        trim: before a diff of several ops made from a rollout is scored, take out the ops its origin task does not
            need (`runtime.trim`: a tip riding along with a rule that wins is not committed with it).
        early_stop: stop as soon as the verdict is certain (exact; never changes a verdict).
        max_examples: at most this many tasks in a candidate's plan (None: the whole pool).
        futility: also stop (and so reject) once the predictive probability of passing on the whole plan falls
            below this (`optim.futility`; 0 turns it off). It never adds an accept; it costs a little power.
        focus: the plan starts with this many tasks most like the candidate's origin task (0: none).
        harm_sample: with focus tasks, the rest of the plan (where the gate looks for harm, not for the gain) is at
            most this many other tasks a look (None: up to `max_examples` in all).
        pool: "val" (score validation tasks only), "train+val" (training tasks too, the origin left out), or
            "auto": "train+val" when the validation split has fewer than `small` tasks, else "val".
        small: see `pool`.
    """

    chunk: int = 8
    screen: bool = True
    screen_tasks: int = 1
    trim: bool = True
    early_stop: bool = True
    max_examples: int | None = 24
    futility: float = 0.02
    focus: int = 8
    harm_sample: int | None = 8
    pool: str = "auto"
    small: int = 100

    def __post_init__(self) -> None:
        if not is_number(self.futility, low=0.0, below=0.5):
            raise ConfigError(f"GateConfig.futility must be a probability in [0, 0.5), got {self.futility!r}")
        for name in ("chunk", "max_examples", "focus", "harm_sample", "small", "screen_tasks"):
            value = getattr(self, name)
            if name in ("max_examples", "harm_sample") and value is None:
                continue
            low = 0 if name == "focus" else 1
            integer(value, f"GateConfig.{name}", low=low)
        if self.pool not in POOLS:
            raise ConfigError(f"GateConfig.pool must be one of {POOLS}, got {self.pool!r}")
        for name in ("screen", "trim", "early_stop"):
            flag(getattr(self, name), f"GateConfig.{name}")

    def widened(self, n_val: int) -> bool:
        """True if the gate's pool takes training tasks beside `n_val` validation tasks."""
        return self.pool == "train+val" or (self.pool == "auto" and n_val < self.small)

"""Named optimizers: recipes of stages, like `optax.adam` is a recipe of transforms."""

from __future__ import annotations

from collections.abc import Callable

from agentgrad.core.ops import Op
from agentgrad.errors import ConfigError
from agentgrad.optim.acceptance import accept_if
from agentgrad.optim.base import Stage
from agentgrad.optim.chain import ChainState, chain
from agentgrad.optim.conflicts import resolve_conflicts
from agentgrad.optim.fusion import fuse
from agentgrad.optim.governance import govern
from agentgrad.optim.improvement import accept_if_better
from agentgrad.optim.schedules import Schedule, constant
from agentgrad.optim.staleness import drop_stale
from agentgrad.optim.tabu import tabu
from agentgrad.optim.trust_region import limit_size


def default(
    *,
    delta: float | Schedule = 0.05,
    margin: float = 0.02,
    alpha_max: int = 4,
    contradicts: Callable[[Op, Op], bool] | None = None,
    max_ops: int = 8,
    max_chars: int = 4000,
    looks: int = 2,
    first_share: float = 0.7,
    promise: float = 0.8,
    rule: str = "sign",
    renew: int | None = 1,
) -> Stage[ChainState]:
    """The default aggregator: tabu, governance, staleness, trust region, conflicts, fusion, acceptance.

    Args:
        delta: the acceptance risk δ (a float or a schedule of the artifact version): commit only if
            P(improvement > margin) > 1 − δ.
        margin: the minimum effect; an exact tie is never accepted.
        alpha_max: the most versions a diff may lag behind the head of a cold artifact and still be rebased.
        contradicts: the strategy's test for semantically contradictory ops (e.g. a rule and its negation).
        max_ops, max_chars: the trust region: larger diffs are refused.
        looks, first_share, promise: how evidence accumulates over looks (`accept_if`).
        rule: "sign" (`accept_if`) or "mean" (`accept_if_better`: a mean gain above `margin`, no significance
            test; the published GEPA loop's admission).
        renew: a ban for want of significance (or a first one for harm) lapses after the head moves this many
            versions (`tabu`).
    """
    if rule not in ("sign", "mean"):
        raise ConfigError(f"default: rule must be 'sign' or 'mean', got {rule!r}")
    risk = constant(delta) if isinstance(delta, float) else delta
    return chain(
        tabu(renew=renew),
        govern(),
        drop_stale(alpha_max=alpha_max),
        limit_size(max_ops=max_ops, max_chars=max_chars),
        resolve_conflicts(contradicts=contradicts),
        fuse(delta=risk, margin=margin, looks=looks, first_share=first_share),
        accept_if(delta=risk, margin=margin, looks=looks, first_share=first_share, promise=promise) if rule == "sign"
        else accept_if_better(margin=margin),
        name="default",
    )

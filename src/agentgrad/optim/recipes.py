"""Named optimizers: recipes of stages, like `optax.adam` is a recipe of transforms."""

from __future__ import annotations

from collections.abc import Callable

from agentgrad.core.ops import Op
from agentgrad.optim.acceptance import accept_if
from agentgrad.optim.base import Stage
from agentgrad.optim.chain import ChainState, chain
from agentgrad.optim.conflicts import resolve_conflicts
from agentgrad.optim.fusion import fuse
from agentgrad.optim.governance import govern
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
    """
    risk = constant(delta) if isinstance(delta, float) else delta
    return chain(
        tabu(),
        govern(),
        drop_stale(alpha_max=alpha_max),
        limit_size(max_ops=max_ops, max_chars=max_chars),
        resolve_conflicts(contradicts=contradicts),
        fuse(delta=risk, margin=margin, looks=looks, first_share=first_share),
        accept_if(delta=risk, margin=margin, looks=looks, first_share=first_share, promise=promise),
        name="default",
    )

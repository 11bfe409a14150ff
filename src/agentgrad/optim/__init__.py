"""The optimizer: stages of pure functions, `chain`, the `default` recipe, schedules of δ, and the `Aggregator`.

A stage (optax-style) is a `Stage`: `init() -> state`, `update(batch, state, ctx) -> (batch, state)`,
`observe(decisions, state, ctx) -> state` and `load(dict) -> state`. The stage factories are verbs, in the order
the `default` recipe chains them: `tabu`, `govern`, `drop_stale`, `limit_size`, `resolve_conflicts`, `fuse`,
`accept_if`. `chain(*stages)` composes stages into one; `stateless(name, update)` makes one from a pure
`update(batch, ctx) -> batch`. The `Aggregator` (torch-style) holds a pipeline's state and runs its `step`; the
schedules (`constant`, `linear`, `exponential`) make δ a function of the artifact's version; `prob_improvement`,
`false_accept_rate` and `posterior_summary` are the exact statistics behind acceptance and fusion.

>>> from agentgrad.optim import accept_if, chain, limit_size, linear, tabu
>>> stage = chain(tabu(), limit_size(max_ops=4), accept_if(delta=linear(0.1, 0.01, steps=9)), name="mine")
>>> stage.name
'mine'
"""

from agentgrad.optim.acceptance import accept_if
from agentgrad.optim.aggregator import Aggregator, StepResult
from agentgrad.optim.base import Batch, Candidate, Context, EmptyState, Head, Stage, StageState, stateless, verdict
from agentgrad.optim.chain import ChainState, chain
from agentgrad.optim.conflicts import resolve_conflicts
from agentgrad.optim.fusion import fuse
from agentgrad.optim.governance import govern
from agentgrad.optim.judge import wins_needed
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.recipes import default
from agentgrad.optim.schedules import (
    Constant,
    Exponential,
    Linear,
    Schedule,
    constant,
    delta_schedule,
    exponential,
    linear,
    schedule_from_dict,
)
from agentgrad.optim.staleness import drop_stale
from agentgrad.optim.stats import (
    FLAT_PRIOR,
    SIGN_TEST_PRIOR,
    SKEPTICAL_PRIOR,
    Posterior,
    false_accept_rate,
    posterior_summary,
    prob_improvement,
)
from agentgrad.optim.tabu import tabu
from agentgrad.optim.trust_region import limit_size

__all__ = [
    "FLAT_PRIOR", "SIGN_TEST_PRIOR", "SKEPTICAL_PRIOR", "Aggregator", "Batch", "Candidate", "ChainState", "Constant",
    "Context", "EmptyState", "Exponential", "Head", "Linear", "NoiseEstimate", "Posterior", "Schedule", "Stage",
    "StageState", "StepResult", "accept_if", "chain", "constant", "default", "delta_schedule", "drop_stale",
    "exponential", "false_accept_rate", "fuse", "govern", "limit_size", "linear", "posterior_summary",
    "prob_improvement", "resolve_conflicts", "schedule_from_dict", "stateless", "tabu", "verdict", "wins_needed",
]

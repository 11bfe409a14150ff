"""The shapes of the functions you give `evolve`: `run`, `propose`, `reward`, `repair`, and an `Agent` that has them.

`evolve(tasks, reward, run=..., propose=...)` and `evolve(tasks, reward, agent=...)` call them as typed here. Each
may be a plain function (the runtime calls it in a bounded thread pool) or an `async def` one, so each returns its
value or an awaitable of it. Arguments are passed by position: your parameters may have any names
(`def run(skill, task)` fits `RunFn`). These are structural `typing.Protocol`s: there is nothing to inherit; a type
checker checks the shapes where you annotate a value with one.

    from agentgrad import RewardFn, Task

    def reward(task: Task, output: str) -> float:
        return 1.0 if str(task.expected) in output else 0.0

    checked: RewardFn = reward  # mypy checks the shape
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from agentgrad.data.task import Task
    from agentgrad.strategies.base import RawProposal


class HasText(Protocol):
    """A reply whose `.text` is the output, such as a provider's `Completion` (a `.usage`, if it has one, is
    charged to the token and cost budgets)."""

    @property
    def text(self) -> str: ...


class HasEdit(Protocol):
    """A proposal object whose `.text` is the edit, such as the `Proposal` an `LLMAgent` returns (a `.usage`, if it
    has one, is charged to the token and cost budgets)."""

    @property
    def text(self) -> RawProposal: ...


RunOutput: TypeAlias = "str | HasText"
"""What `run` returns: the output text, or an object with a `.text` string."""

ProposalLike: TypeAlias = "RawProposal | HasEdit"
"""What `propose` and `repair` return: free text, a structured edit (a dict with ``action`` (add, replace or
delete), ``content`` and ``target``), a list of them, or an object with one of these as its `.text`."""


class RunFn(Protocol):
    """`run(rendered, task) -> output`: the agent's answer to `task` with the artifact in its prompt.

    `rendered` is what the strategy shows of the artifact's text (for rules, the text itself). A `run` that
    raises, returns None or anything without text, or times out scores that task 0 and is counted (per-example
    evidence); if every call fails, the run stops with `RunFailedError`.
    """

    def __call__(self, rendered: str, task: Task, /) -> RunOutput | Awaitable[RunOutput]: ...


class ProposeFn(Protocol):
    """`propose(rendered, task, output, reward) -> edit`: a change of the artifact, asked for on a failed rollout.

    Called for training tasks whose `reward` was below 1; `output` is None when `run` failed on the task. The edit
    goes to the strategy, which turns it into diff ops; one that is empty, malformed or too large is counted as
    invalid, not raised.
    """

    def __call__(self, rendered: str, task: Task, output: str | None, reward: float,
                 /) -> ProposalLike | Awaitable[ProposalLike]: ...


class RewardFn(Protocol):
    """`reward(task, output) -> float`: the score in [0, 1] of `output`, the text `run` returned for `task`.

    A grader bug is systemic: a reward that raises, times out, or returns anything but a finite number in [0, 1]
    stops the run at once with `RewardError` naming the task.
    """

    def __call__(self, task: Task, output: str, /) -> float | Awaitable[float]: ...


class RepairFn(Protocol):
    """`repair(diff, head_text) -> edit`: re-anchor a diff that is too stale to rebase on the current head's text.

    `diff` is the stale diff as a dict (`Diff.to_dict()`); the edit takes the forms `propose`'s does and is then
    checked like a new proposal. Used under `Staleness(policy="repair", repair=...)`.
    """

    def __call__(self, diff: dict[str, Any], head_text: str, /) -> ProposalLike | Awaitable[ProposalLike]: ...


@runtime_checkable
class Agent(Protocol):
    """What `evolve(..., agent=...)` takes: `run` and `propose` methods of the shapes of `RunFn` and `ProposeFn`.

    `LLMAgent` is one. Functions passed as `run=` or `propose=` take the place of the agent's methods. An agent
    may also have a `repair` method of `RepairFn`'s shape; a run uses it under the repair policy, given as
    `Staleness(policy="repair", repair=agent.repair)`. `isinstance(x, Agent)` checks only that both methods exist.
    """

    def run(self, rendered: str, task: Task, /) -> RunOutput | Awaitable[RunOutput]: ...

    def propose(self, rendered: str, task: Task, output: str | None, reward: float,
                /) -> ProposalLike | Awaitable[ProposalLike]: ...


"""`DemoAgent`: proposals that need no strong model: worked examples (a failed training input and its gold answer).

It goes with the `Demonstrations` strategy (`agentgrad.strategies.demos`), which keeps each example as one keyed
line the optimizer adds, swaps and drops under the same gate as rules. `propose` turns the failed task into a
demonstration (`demo_from_failure`) without calling a model; with ``rules=True`` every other proposal call is the
wrapped `LLMAgent`'s own proposal (a rule), so one skill holds both, and a rule the model could not write is
replaced by the demonstration.

`run` shows the skill's examples to the model as earlier turns of the conversation (user: input, assistant:
answer) and the rest of the skill (its rules) as the system message: a small model copies the form of an answer
from turns much more readily than from a list in its system prompt. With ``turns=False`` the skill is the system
message as rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentgrad.agents.llm import LLMAgent, Proposal
from agentgrad.core._checks import integer
from agentgrad.errors import InvalidProposalError, StateDictError
from agentgrad.providers.base import Completion, Message
from agentgrad.strategies.demos import demo_from_failure, split_proposal

DEMO_PROPOSERS = ("demos", "demos+rules")


def demo_messages(rendered: str, task: Any) -> list[Message]:
    """The conversation for `task`: the rules of `rendered` as the system message (if any), each example of it as
    a user turn and an assistant turn, then the task's input. A skill whose examples cannot be read (an
    ``Input:`` line with no ``Answer:``) is the system message as it is."""
    question = str(getattr(task, "input", task))
    try:
        pairs, rest = split_proposal(rendered)
    except InvalidProposalError:
        pairs, rest = [], rendered
    system = rest.strip()
    messages = [Message("system", system)] if system else []
    for shown, answer in pairs:
        messages += [Message("user", shown), Message("assistant", answer)]
    return [*messages, Message("user", question)]


class DemoAgent:
    """Solves with `solver`'s model and parameters; proposes demonstrations from failures (see the module doc).

    Args:
        solver: the `LLMAgent` whose provider and solving parameters `run` uses, and whose `propose` writes the
            rules when `rules` is set. Its rule refinement is turned off: the `Demonstrations` strategy takes
            rules as text to add, not as replacements.
        rules: alternate: even proposal calls give a demonstration, odd ones ask `solver` for a rule.
        turns: show examples as conversation turns (else the rendered skill is the system message).
    State: the number of proposal calls made (`calls`), and `solver`'s own state.
    """

    def __init__(self, solver: LLMAgent, *, rules: bool = False, turns: bool = True) -> None:
        self.solver, self.rules, self.turns = solver, rules, turns
        if rules:
            solver.refine = None
        self.calls = 0

    async def run(self, rendered: str, task: Any) -> Completion:
        """Answer `task` with the skill `rendered`: examples as turns, rules as the system message."""
        if not self.turns:
            return await self.solver.run(rendered, task)
        return await self.solver.provider.complete(demo_messages(rendered, task), **self.solver.params)

    async def propose(self, rendered: str, task: Any, output: str | None, reward: float) -> Proposal | str | None:
        """A demonstration of the failed `task` (no model call), or, with `rules`, every other call a rule."""
        call, self.calls = self.calls, self.calls + 1
        demo = demo_from_failure(task, output, reward)
        if self.rules and call % 2 == 1:
            try:
                return await self.solver.propose(rendered, task, output, reward)
            except InvalidProposalError:
                if demo is None:
                    raise
        if demo is None:
            raise InvalidProposalError(f"no demonstration from task {getattr(task, 'id', task)!r}: it has no gold "
                                       "answer, a blank input, or a gold answer too long to show")
        return demo

    async def repair(self, diff: dict[str, Any], head_text: str) -> Proposal:
        """The new lines of a stale diff, as text (no model call): examples and rules re-add themselves."""
        return Proposal("\n".join(str(op["new"]) for op in diff.get("ops", []) if op.get("new")))

    def state_dict(self) -> dict[str, Any]:
        """The proposal call count and the solver's state, JSON-ready."""
        return {"calls": self.calls, "solver": self.solver.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict()` output; a malformed dict raises `StateDictError`."""
        calls = integer(state.get("calls"), "DemoAgent state 'calls'", low=0, error=StateDictError)
        self.solver.load_state_dict(state.get("solver", {}))
        self.calls = calls

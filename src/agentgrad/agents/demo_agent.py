"""`DemoAgent`: proposals that need no strong model: worked examples (a failed training input and its gold answer).

It goes with the `Demonstrations` strategy (`agentgrad.strategies.demos`), which keeps each example as one keyed
line the optimizer adds, swaps and drops under the same gate as rules. `propose` turns the failed task into a
demonstration (`demo_from_failure`) without calling a model; with ``rules=True`` every other proposal call is the
wrapped `LLMAgent`'s own proposal (a rule), so one skill holds both, and a rule the model could not write is
replaced by the demonstration. A demonstration shows the answer of the task it was made from, so the gate takes no
win there as evidence (`runtime.shown`): it is kept only for what it does on other tasks.

`run` shows the skill's examples to the model as earlier turns of the conversation (user: input, assistant:
answer) and the rest of the skill (its rules) as the system message: a small model copies the form of an answer
from turns much more readily than from a list in its system prompt. With ``turns=False`` the skill is the system
message as rendered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentgrad.agents.llm import LLMAgent, Proposal
from agentgrad.core._checks import flag, integer
from agentgrad.errors import InvalidProposalError, StateDictError
from agentgrad.providers.base import Completion, Message
from agentgrad.runtime.locality import Locality
from agentgrad.strategies.demos import demo_from_failure, split_proposal

DEMO_PROPOSERS = ("demos", "demos+rules")


def nearest_examples(pairs: Sequence[tuple[str, str]], question: str, k: int) -> list[tuple[str, str]]:
    """The `k` examples whose inputs are most like `question` (TF-IDF cosine, `runtime.locality`), the most alike
    last, next to the question; among equals, the skill's order."""
    if len(pairs) <= 1:
        return list(pairs)
    inputs = {f"e{i}": shown for i, (shown, _) in enumerate(pairs)}
    likeness = Locality({**inputs, "q": question})
    ranked = sorted(range(len(pairs)), key=lambda i: -likeness.similarity(f"e{i}", "q"))[:k]
    return [pairs[i] for i in reversed(ranked)]


def answer_grammar(rendered: str) -> str | None:
    """A llama.cpp grammar whose only sentences are the answers the examples of `rendered` show (None: no
    example)."""
    try:
        pairs, _ = split_proposal(rendered)
    except InvalidProposalError:
        return None
    answers = sorted({answer.strip() for _, answer in pairs if answer.strip()})
    return "root ::= " + " | ".join(json.dumps(a, ensure_ascii=False) for a in answers) if answers else None


def demo_messages(rendered: str, task: Any, *, nearest: int | None = None) -> list[Message]:
    """The conversation for `task`: the rules of `rendered` as the system message (if any), each example of it as
    a user turn and an assistant turn (with `nearest`, only that many, the most like the task's input), then the
    task's input. A skill whose examples cannot be read (an ``Input:`` line with no ``Answer:``) is the system
    message as it is."""
    question = str(getattr(task, "input", task))
    try:
        pairs, rest = split_proposal(rendered)
    except InvalidProposalError:
        pairs, rest = [], rendered
    if nearest is not None:
        pairs = nearest_examples(pairs, question, nearest)
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
        nearest: show only this many examples, those whose inputs are most like the task's (None: all of them),
            as DSPy's KNNFewShot retrieves its demonstrations. A small model that can only copy the form of an
            answer then copies the answer of the most alike example: the skill works as a nearest-neighbour
            memory, and the optimizer learns which examples to keep in it.
        closed: the answer must be one of the answers the skill's examples show (a llama.cpp ``grammar`` on the
            solving call, so for the local model and llama.cpp servers only; no examples: no constraint). For a
            closed label set, such as arbitrary queue codes, that a small model would otherwise make up.
    State: the number of proposal calls made (`calls`), and `solver`'s own state.
    """

    def __init__(self, solver: LLMAgent, *, rules: bool = False, turns: bool = True,
                 nearest: int | None = None, closed: bool = False) -> None:
        if nearest is not None:
            integer(nearest, "DemoAgent: nearest", low=1)
        self.solver, self.rules, self.turns, self.nearest = solver, rules, turns, nearest
        self.closed = flag(closed, "DemoAgent: closed")
        if rules:
            solver.refine = None
        self.calls = 0

    async def run(self, rendered: str, task: Any) -> Completion:
        """Answer `task` with the skill `rendered`: examples as turns, rules as the system message."""
        if not self.turns:
            return await self.solver.run(rendered, task)
        params = dict(self.solver.params)
        if self.closed:
            shown = answer_grammar(rendered)
            if shown is not None:
                params["grammar"] = shown
        return await self.solver.provider.complete(demo_messages(rendered, task, nearest=self.nearest), **params)

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

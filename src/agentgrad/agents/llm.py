"""`LLMAgent`: run, propose and repair backed by any `Provider`.

`run` puts the rendered skill in the system message and the task's input in the user message. `propose` shows a
model the failed example (input, output, expected answer) and asks for structured edits, validated against a
schema; a reply that does not fit gets one repair attempt, then the proposal is a recorded failure. `repair`
re-anchors a stale edit on the current head. Prompts live in files beside this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from agentgrad.agents.edits import parse_edits
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Completion, Message, Provider, Usage


@dataclass(frozen=True)
class Proposal:
    """What `propose` and `repair` return: the edits (structured, or one rule as text) and what asking cost.

    The runtime reads `.text` as the proposal and charges `.usage` to the token and cost budgets.
    """

    text: list[dict[str, str]] | str
    usage: Usage = field(default_factory=Usage)


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.cost + b.cost)


def load_prompt(name: str) -> str:
    """The text of prompt file `name` (e.g. "reflect") shipped in agentgrad/agents/prompts/."""
    return (resources.files("agentgrad.agents") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


class LLMAgent:
    """An agent whose `run` and `propose` are calls to `provider` (and `reflector` for proposals, if given).

    Args:
        provider: the model that solves tasks.
        reflector: the model that proposes edits (default: the same provider).
        params: extra parameters for solving calls (e.g. temperature=0, max_tokens=64).
        reflect_params: extra parameters for proposal calls.
        max_edits: the most edits one proposal may hold.
        structured: ask for JSON edits (checked against a schema); False asks for one rule on one line, which
            small local models manage far more reliably.
    """

    def __init__(self, provider: Provider, *, reflector: Provider | None = None,
                 params: dict[str, Any] | None = None, reflect_params: dict[str, Any] | None = None,
                 max_edits: int = 3, structured: bool = True) -> None:
        self.provider, self.reflector = provider, reflector or provider
        self.params = dict(params or {})
        self.reflect_params = dict(reflect_params or {})
        self.max_edits, self.structured = max_edits, structured
        self.line_prompt = load_prompt("reflect_line")
        self.reflect_prompt, self.repair_prompt = load_prompt("reflect"), load_prompt("repair")
        self.fix_prompt = load_prompt("fix_format")

    async def run(self, rendered: str, task: Any) -> Completion:
        """Answer `task` with the skill `rendered` as the system message."""
        messages = [Message("system", rendered)] if rendered.strip() else []
        messages.append(Message("user", str(getattr(task, "input", task))))
        return await self.provider.complete(messages, **self.params)

    async def _edits(self, prompt: str) -> Proposal:
        messages = [Message("user", prompt)]
        reply = await self.reflector.complete(messages, **self.reflect_params)
        try:
            return Proposal(parse_edits(reply.text, max_edits=self.max_edits), reply.usage)
        except InvalidProposalError as first:
            messages += [Message("assistant", reply.text), Message("user", self.fix_prompt.format(error=first))]
            retry = await self.reflector.complete(messages, **self.reflect_params)
            try:
                return Proposal(parse_edits(retry.text, max_edits=self.max_edits), _add(reply.usage, retry.usage))
            except InvalidProposalError as second:
                raise InvalidProposalError(f"the proposer's reply did not fit the schema twice: {second}") from first

    async def propose(self, rendered: str, task: Any, output: str | None, reward: float) -> Proposal:
        """Edits that would have fixed this failed example: structured, or one rule as a line of text."""
        expected = getattr(task, "expected", None)
        fields = {"skill": rendered or "(empty)", "input": getattr(task, "input", task),
                  "output": output if output is not None else "(the call failed)",
                  "expected": "(not given)" if expected is None else expected, "reward": reward,
                  "max_edits": self.max_edits}
        if not self.structured:
            return await self._line(self.line_prompt.format(**fields))
        return await self._edits(self.reflect_prompt.format(**fields))

    async def _line(self, prompt: str) -> Proposal:
        reply = await self.reflector.complete([Message("user", prompt)], **self.reflect_params)
        lines = [ln.strip().lstrip("-*• ").strip().strip('"').strip() for ln in reply.text.splitlines()]
        rule = next((ln for ln in lines if ln), "")
        if not rule:
            raise InvalidProposalError("the proposer replied with no rule")
        return Proposal(rule, reply.usage)

    async def repair(self, diff: dict[str, Any], head_text: str) -> Proposal:
        """The intent of a stale diff, re-expressed as edits of the current skill."""
        edit = "\n".join(f"- {op['action']}: {op.get('new') or op.get('old')}" for op in diff.get("ops", []))
        return await self._edits(self.repair_prompt.format(skill=head_text or "(empty)", edit=edit))

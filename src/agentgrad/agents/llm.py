"""`LLMAgent`: run, propose and repair backed by any `Provider`.

`run` puts the rendered skill in the system message and the task's input in the user message. `propose` shows a
model the failed example (input, output, expected answer, and the expected answers of earlier failures) and asks
for a change of the skill, in one of two styles:

- ``"edits"``: structured JSON edits (add / replace / delete rules), validated against a schema; a reply that does
  not fit gets one repair attempt, then the proposal is a recorded failure. For capable (hosted) models.
- ``"rule"``: one rule, ``{"rule": "..."}``, asked for with worked examples (few-shot) and a computed comparison
  of the answer with the expected one. Small local models follow this scaffold; pass `edits.RULE_SCHEMA` as
  llama.cpp's ``json_schema`` in `reflect_params` and every reply has that shape. A rule that only repeats the
  prompt, or names just one of several expected answers, is a recorded failure. A rule much like one the skill
  already has is proposed as its replacement (a refinement), any other rule as an addition.

`repair` re-anchors a stale edit on the current head. Prompts and worked examples live in files beside this module.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from importlib import resources
from typing import Any

from agentgrad.agents.edits import check_general, parse_edits, parse_rule
from agentgrad.core._checks import is_integer
from agentgrad.data.scorers import contains
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.providers.base import Completion, Message, Provider, Usage
from agentgrad.strategies.rules import strip_bullet

STYLES = ("edits", "rule")
CLIP = 400
_EXAMPLE_FIELDS = ("skill", "input", "output", "expected", "answers", "rule")


@dataclass(frozen=True)
class Proposal:
    """What `propose` and `repair` return: the edits (structured, or rules as text) and what asking cost.

    The runtime reads `.text` as the proposal and charges `.usage` to the token and cost budgets.
    """

    text: list[dict[str, str]] | str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class RuleExample:
    """A worked example of the one-rule scaffold: the fields of a failed case and the rule it should give."""

    fields: Mapping[str, str]
    rule: str


def _add(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.cost + b.cost)


def load_prompt(name: str) -> str:
    """The text of prompt file `name` (e.g. "reflect") shipped in agentgrad/agents/prompts/."""
    return (resources.files("agentgrad.agents") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def parse_examples(text: str) -> tuple[RuleExample, ...]:
    """Worked examples from a markdown file: blocks opened by ``## Example``, one ``field: value`` line each.

    Every block needs skill, input, output, expected, answers and rule; `ConfigError` names a block that lacks one.
    """
    blocks = re.split(r"^## Example\s*$", re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL), flags=re.MULTILINE)
    examples = []
    for number, block in enumerate(blocks[1:], 1):
        values = dict(line.split(":", 1) for line in block.strip().splitlines() if ":" in line)
        values = {k.strip(): v.strip() for k, v in values.items()}
        missing = [name for name in _EXAMPLE_FIELDS if not values.get(name)]
        if missing:
            raise ConfigError(f"worked example {number} lacks {missing}")
        examples.append(RuleExample({k: values[k] for k in _EXAMPLE_FIELDS[:-1]}, values["rule"]))
    if not examples:
        raise ConfigError("no worked example found (each starts with a '## Example' line)")
    return tuple(examples)


def compare(output: str | None, expected: Any) -> str:
    """One sentence on how an answer differs from the expected one, for a proposer that cannot tell by itself."""
    if output is None:
        return "the assistant's call failed, so there is no answer."
    if expected is None:
        return "no expected answer was given; judge the answer by the task."
    got, want = len(output.split()), len(str(expected).split())
    if contains(output, expected) == 1.0 and got > want:
        return (f"the expected answer is inside the assistant's answer, but the assistant wrote {got} words where "
                f"{want} {'is' if want == 1 else 'are'} expected.")
    if got > 3 * want + 2:
        return f"the assistant wrote {got} words; the expected answer has {want}."
    if _shape(output) == _shape(str(expected)):
        return "the assistant's answer has the expected form but the wrong value."
    return "the assistant's answer has the wrong content or form."


def _shape(text: str) -> str:
    """The form of a short answer: each run of letters one "a", of digits one "9", other characters kept."""
    return re.sub(r"a+", "a", re.sub(r"9+", "9", re.sub(r"\d", "9", re.sub(r"[^\W\d_]", "a", text.strip()))))


def _clip(value: Any, limit: int = CLIP) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_case(template: str, fields: Mapping[str, Any]) -> str:
    """The case `template` filled from `fields` (skill, input, output, expected, answers), comparison computed."""
    output, expected = fields.get("output"), fields.get("expected")
    return template.format(skill=_clip(fields.get("skill") or "(none)"), input=_clip(fields.get("input")),
                           output="(the call failed)" if output is None else _clip(output) or "(empty)",
                           expected="(not given)" if expected is None else _clip(expected),
                           answers=_clip(fields.get("answers")),
                           comparison=compare(None if output is None else str(output), expected))


def closest_rule(skill: str, rule: str, threshold: float) -> str | None:
    """The rule of `skill` (one per line, bullets ignored) most like `rule` word for word, if at least `threshold`
    alike (difflib's ratio over words, case-folded) and not the same rule; else None."""
    words = _words(rule)
    best, score = None, threshold
    for line in skill.splitlines():
        existing = strip_bullet(line)
        if not existing or line.lstrip().startswith("#") or _words(existing) == words:
            continue
        ratio = SequenceMatcher(None, _words(existing), words, autojunk=False).ratio()
        if ratio >= score:
            best, score = existing, ratio
    return best


def _words(text: str) -> list[str]:
    return text.casefold().rstrip(".!;: ").split()


class LLMAgent:
    """An agent whose `run` and `propose` are calls to `provider` (and `reflector` for proposals, if given).

    Args:
        provider: the model that solves tasks.
        reflector: the model that proposes edits (default: the same provider).
        params: extra parameters for solving calls (e.g. temperature=0, max_tokens=64).
        reflect_params: extra parameters for proposal calls (e.g. temperature, max_tokens, json_schema).
        max_edits: the most edits one proposal may hold ("edits" style).
        style: "edits" (structured JSON edits) or "rule" (one rule from a few-shot scaffold; see the module doc).
        seed: when set, proposal call number i carries ``seed=seed + i``, so sampled proposals differ from each
            other yet a run can be replayed (for providers that accept a seed: llama.cpp, OpenAI).
        remember: how many expected answers of earlier failures to keep; up to `shown` distinct ones are shown
            with each new failure, so the proposer sees what answers of this kind look like.
        shown: the most expected answers listed in one proposal prompt.
        refine: "rule" style: a new rule at least this alike (`closest_rule`) to a rule of the skill is proposed
            as a replacement of that rule (a refinement) instead of an addition; None always adds.
    State: the number of proposal calls made and the remembered expected answers (`state_dict`).
    """

    def __init__(self, provider: Provider, *, reflector: Provider | None = None,
                 params: dict[str, Any] | None = None, reflect_params: dict[str, Any] | None = None,
                 max_edits: int = 3, style: str = "edits", seed: int | None = None, remember: int = 16,
                 shown: int = 4, refine: float | None = 0.6) -> None:
        if style not in STYLES:
            raise ConfigError(f"LLMAgent style must be one of {STYLES}, got {style!r}")
        if remember < 0 or shown < 1:
            raise ConfigError(f"LLMAgent needs remember >= 0 and shown >= 1, got {remember!r}, {shown!r}")
        self.provider, self.reflector = provider, reflector or provider
        self.params = dict(params or {})
        self.reflect_params = dict(reflect_params or {})
        if refine is not None and not 0.0 < refine <= 1.0:
            raise ConfigError(f"LLMAgent refine must be in (0, 1] or None, got {refine!r}")
        self.max_edits, self.style, self.seed, self.shown, self.refine = max_edits, style, seed, shown, refine
        self.reflect_prompt, self.repair_prompt = load_prompt("reflect"), load_prompt("repair")
        self.fix_prompt = load_prompt("fix_format")
        self.rule_prompt, self.case_prompt = load_prompt("reflect_rule"), load_prompt("reflect_rule_case")
        self.examples = parse_examples(load_prompt("reflect_rule_examples"))
        self.calls = 0
        self.answers: deque[str] = deque(maxlen=remember)

    async def run(self, rendered: str, task: Any) -> Completion:
        """Answer `task` with the skill `rendered` as the system message."""
        messages = [Message("system", rendered)] if rendered.strip() else []
        messages.append(Message("user", str(getattr(task, "input", task))))
        return await self.provider.complete(messages, **self.params)

    async def propose(self, rendered: str, task: Any, output: str | None, reward: float) -> Proposal:
        """A change of the skill that would have fixed this failed example (edits, or one rule as text)."""
        expected = getattr(task, "expected", None)
        answers = self._answers(expected)
        fields = {"skill": rendered or "(empty)", "input": getattr(task, "input", task),
                  "output": output if output is not None else "(the call failed)",
                  "expected": "(not given)" if expected is None else expected, "reward": reward,
                  "max_edits": self.max_edits, "answers": ", ".join(answers) or "(not given)"}
        if self.style == "rule":
            return await self._rule({**fields, "skill": rendered, "output": output, "expected": expected},
                                    echoes=[str(v) for v in (expected, output) if v is not None], answers=answers)
        return await self._edits(self.reflect_prompt.format(**fields))

    def _answers(self, expected: Any) -> list[str]:
        """This failure's expected answer, then distinct others remembered (newest first); remembers this one."""
        if expected is None:
            return []
        current = _clip(expected, 80)
        listed = [current]
        for answer in reversed(self.answers):
            if len(listed) >= self.shown:
                break
            if answer not in listed:
                listed.append(answer)
        if self.answers.maxlen:
            self.answers.append(current)
        return listed

    def remember(self, answers: Iterable[Any]) -> None:
        """Remember expected answers (say, of some training tasks) so that even the first proposal sees what the
        answers of this kind of task look like. Never pass answers of validation or test tasks."""
        for answer in answers:
            if answer is not None and self.answers.maxlen:
                self.answers.append(_clip(answer, 80))

    def _reflect_params(self) -> dict[str, Any]:
        params = dict(self.reflect_params)
        if self.seed is not None:
            params["seed"] = self.seed + self.calls
        self.calls += 1
        return params

    def rule_messages(self, fields: Mapping[str, Any]) -> list[Message]:
        """The conversation of the one-rule scaffold: instructions, the worked examples as turns, then the case."""
        messages = [Message("system", self.rule_prompt)]
        for example in self.examples:
            messages += [Message("user", render_case(self.case_prompt, example.fields)),
                         Message("assistant", json.dumps({"rule": example.rule}))]
        messages.append(Message("user", render_case(self.case_prompt, fields)))
        return messages

    async def _rule(self, fields: Mapping[str, Any], echoes: Sequence[str], answers: Sequence[str]) -> Proposal:
        """One rule, checked (no retry: a small model asked again mostly repeats itself)."""
        reply = await self.reflector.complete(self.rule_messages(fields), **self._reflect_params())
        rule = self._checked_rule(reply.text, echoes, answers)
        similar = closest_rule(str(fields.get("skill") or ""), rule, self.refine) if self.refine is not None else None
        if similar is None:
            return Proposal(rule, reply.usage)
        return Proposal([{"action": "replace", "target": similar, "content": rule}], reply.usage)

    def _checked_rule(self, reply: str, echoes: Sequence[str], answers: Sequence[str]) -> str:
        rule = parse_rule(reply, echoes=[*(example.rule for example in self.examples), *echoes])
        check_general(rule, answers)
        return rule

    async def _edits(self, prompt: str) -> Proposal:
        messages = [Message("user", prompt)]
        reply = await self.reflector.complete(messages, **self._reflect_params())
        try:
            return Proposal(parse_edits(reply.text, max_edits=self.max_edits), reply.usage)
        except InvalidProposalError as first:
            messages += [Message("assistant", reply.text), Message("user", self.fix_prompt.format(error=first))]
            retry = await self.reflector.complete(messages, **self._reflect_params())
            try:
                return Proposal(parse_edits(retry.text, max_edits=self.max_edits), _add(reply.usage, retry.usage))
            except InvalidProposalError as second:
                raise InvalidProposalError(f"the proposer's reply did not fit the schema twice: {second}") from first

    async def repair(self, diff: dict[str, Any], head_text: str) -> Proposal:
        """The intent of a stale diff, re-expressed for the current skill.

        "rule" style: the diff's new rules, as text, with no model call (adding a rule needs no anchor).
        """
        ops = diff.get("ops", [])
        if self.style == "rule":
            return Proposal("\n".join(str(op["new"]) for op in ops if op.get("new")))
        edit = "\n".join(f"- {op['action']}: {op.get('new') or op.get('old')}" for op in ops)
        return await self._edits(self.repair_prompt.format(skill=head_text or "(empty)", edit=edit))

    def state_dict(self) -> dict[str, Any]:
        """The proposal call count and the remembered expected answers, JSON-ready."""
        return {"calls": self.calls, "answers": list(self.answers)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore `state_dict()` output; a malformed dict raises `StateDictError` and changes nothing."""
        calls, answers = state.get("calls"), state.get("answers")
        if not (is_integer(calls, low=0) and isinstance(answers, list) and all(isinstance(a, str) for a in answers)):
            raise StateDictError(f"LLMAgent state needs calls (int >= 0) and answers (list of str), got {state!r:.200}")
        self.calls = calls
        self.answers.clear()
        self.answers.extend(answers)

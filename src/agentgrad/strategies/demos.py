"""`Demonstrations`: worked examples (an input and its gold answer) as evolvable units, beside rules.

Each example is one ``key: value`` line (scope `key`) whose key is derived from the input, so one input is never
there twice and a new answer for it replaces the old one::

    example-1f3a9c0b2d: "My card was charged twice" -> "KTR-4"

The input and the answer are JSON strings: one line each, white space collapsed; an input longer than
`max_input` characters is cut (ending with ``…``) and the key is that of the cut input. Lines that are not
examples are left alone, so rules (``- rule`` bullets, which this strategy hands to its `rules` strategy) live in
the same skill text. The solver sees the examples gathered at the end under ``## Examples``::

    Input: My card was charged twice
    Answer: KTR-4

A free-text proposal is written the same way: ``Input:`` lines (continued on the lines up to ``Answer:``) and
``Answer:`` lines are examples, as are stored example lines; every other line goes to the `rules` strategy
(``# headings`` and blank lines are skipped). A dict proposal ``{input: answer}`` sets examples (an answer of None
deletes one). Structured edits take an example (either form) as `content` and an input, an example or an
example key as `target`.

The cap: at `max_examples`, adding an example also deletes the oldest one (the first in the text) in the same
diff, so the gate judges the swap as a whole and a useful example is only lost when the newcomer does better.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from agentgrad.core._checks import integer
from agentgrad.core.diff import apply_ops
from agentgrad.core.ops import Action, Op
from agentgrad.core.units import Scope, normalise
from agentgrad.errors import InvalidProposalError
from agentgrad.strategies.base import Edit, Planner, RawProposal, Strategy, UnitStrategy, check_proposal
from agentgrad.strategies.rules import AppendRules

if TYPE_CHECKING:
    from agentgrad.data.task import Task

MAX_EXAMPLES = 16
MAX_INPUT = 400
MAX_ANSWER = 200
HEADING = "## Examples"
PREFIX = "example-"
_KEY = re.compile(r"example-[0-9a-f]{10}")
_LINE = re.compile(r"^\s*example-[0-9a-f]{10}\s*:\s*(?P<rest>.*)$")
_INPUT = re.compile(r"^\s*(?:[-*]\s+)?input\s*:\s?(?P<text>.*)$", re.IGNORECASE)
_ANSWER = re.compile(r"^\s*(?:[-*]\s+)?answer\s*:\s?(?P<text>.*)$", re.IGNORECASE)
_HEADING = re.compile(r"^\s*#{1,6}\s+examples\s*#*\s*$", re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")


def clip(text: str, limit: int) -> str:
    """`text` on one line (white space collapsed), cut to at most `limit` characters ending with ``…``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1].rstrip() + "…"


def example_key(question: str) -> str:
    """The unit key of the example for `question` (as stored: one line, already cut)."""
    return PREFIX + hashlib.sha256(question.encode("utf-8")).hexdigest()[:10]


@dataclass(frozen=True)
class Example:
    """One demonstration: an input and its gold answer, each one line (`make_example` checks and cuts them)."""

    input: str
    answer: str

    @property
    def key(self) -> str:
        """The unit key, derived from the input."""
        return example_key(self.input)

    def line(self) -> str:
        """The stored form: ``example-<hash>: "input" -> "answer"``."""
        question, answer = (json.dumps(x, ensure_ascii=False) for x in (self.input, self.answer))
        return f"{self.key}: {question} -> {answer}"

    def shown(self) -> str:
        """What the solver sees: an ``Input:`` line and an ``Answer:`` line."""
        return f"Input: {self.input}\nAnswer: {self.answer}"


def make_example(question: str, answer: str, *, max_input: int = MAX_INPUT, max_answer: int = MAX_ANSWER) -> Example:
    """An `Example` with the input cut to `max_input`; raises `InvalidProposalError` for an empty input or answer
    or an answer longer than `max_answer` (a cut gold answer would teach a wrong one)."""
    cut, gold = clip(question, max_input), " ".join(answer.split())
    if not cut:
        raise InvalidProposalError("an example needs a non-empty input")
    if not gold:
        raise InvalidProposalError(f"the example {cut[:60]!r} has an empty answer")
    if len(gold) > max_answer:
        raise InvalidProposalError(f"the answer of {cut[:60]!r} has {len(gold)} characters; the limit is {max_answer}")
    return Example(cut, gold)


def read_line(line: str) -> Example | None:
    """The example a stored line holds, or None when the line is not one."""
    match = _LINE.match(line)
    if match is None:
        return None
    rest = match.group("rest")
    try:
        question, end = json.JSONDecoder().raw_decode(rest)
        arrow = rest[end:].strip()
        answer = json.loads(arrow[2:]) if arrow.startswith("->") else None
    except ValueError:
        return None
    if not isinstance(question, str) or not isinstance(answer, str):
        return None
    return Example(question, answer)


def examples(text: str) -> list[Example]:
    """The examples stored in `text`, in order."""
    return [found for line in text.split("\n") if (found := read_line(line)) is not None]


def split_proposal(text: str) -> tuple[list[tuple[str, str]], str]:
    """The (input, answer) pairs of a free-text proposal, and the rest of its lines (the rules part)."""
    pairs: list[tuple[str, str]] = []
    rest: list[str] = []
    pending: list[str] | None = None
    for line in text.split("\n"):
        stored = read_line(line)
        answer = _ANSWER.match(line)
        if pending is not None:
            if answer is not None:
                pairs.append((" ".join(pending), answer.group("text")))
                pending = None
            elif stored is not None or _INPUT.match(line) or line.lstrip().startswith("#"):
                raise InvalidProposalError(f"the example {' '.join(pending)[:60]!r} has no 'Answer:' line")
            else:
                pending.append(line)
        elif stored is not None:
            pairs.append((stored.input, stored.answer))
        elif (started := _INPUT.match(line)) is not None:
            pending = [started.group("text")]
        elif answer is not None:
            raise InvalidProposalError(f"{line.strip()[:60]!r} is an 'Answer:' line with no 'Input:' line before it")
        elif _HEADING.match(line) is None:
            rest.append(line)
    if pending is not None:
        raise InvalidProposalError(f"the example {' '.join(pending)[:60]!r} has no 'Answer:' line")
    return pairs, "\n".join(rest)


def question_of(target: str) -> str:
    """The input a `target` names: a stored example line, an ``Input:`` (and ``Answer:``) block, or the input."""
    stored = read_line(target.strip())
    if stored is not None:
        return stored.input
    started = _INPUT.match(target.strip())
    if started is None:
        return target
    try:
        pairs = split_proposal(target)[0]
    except InvalidProposalError:  # an 'Input:' line with no 'Answer:' names the input on that line
        pairs = []
    return pairs[0][0] if pairs else started.group("text")


def _has_rules(text: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in text.split("\n"))


@dataclass(frozen=True)
class Demonstrations(UnitStrategy):
    """Examples as keyed lines, rules handed to `rules`; see the module docstring for the formats.

    Args:
        max_examples: the most examples a text holds; at the cap an add also deletes the oldest example.
        max_input: inputs are cut to this many characters.
        max_answer: answers longer than this are refused.
        rules: the strategy for the lines of a proposal that are not examples (`AppendRules` by default).
        max_chars: proposals with more characters than this are refused.
    """

    scope: ClassVar[Scope] = Scope.KEY
    name: ClassVar[str] = "demonstrations"
    max_examples: int = MAX_EXAMPLES
    max_input: int = MAX_INPUT
    max_answer: int = MAX_ANSWER
    rules: Strategy = field(default_factory=AppendRules)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_examples", "max_input", "max_answer"):
            integer(getattr(self, name), f"{self.name}: {name}", low=1)

    def ops(self, proposal: RawProposal, text: str) -> tuple[Op, ...]:
        """The example ops of `proposal`, then the ops its other lines ask of `rules` (free text only).

        Raises `InvalidProposalError` (its message starts with this strategy's name) for a bad proposal.
        """
        try:
            checked = check_proposal(proposal, self.max_chars, self.name)
            if not isinstance(checked, str):
                return super().ops(checked, text)
            pairs, rest = split_proposal(checked)
            if not pairs and not _has_rules(rest):
                raise InvalidProposalError(f"{self.name}: the proposal holds no examples and no rules")
            mine = super().ops(checked, text) if pairs else ()
            theirs = self.rules.ops(rest, apply_ops(text, mine)) if _has_rules(rest) else ()
        except InvalidProposalError as exc:
            if str(exc).startswith(f"{self.name}:"):
                raise
            raise InvalidProposalError(f"{self.name}: {exc}") from exc
        return mine + theirs

    def render(self, text: str) -> str:
        """The text without its example lines (and ``Examples`` headings), then every example under one heading."""
        lines = text.split("\n")
        found = [e for e in map(read_line, lines) if e is not None]
        if not found:
            return text
        rest = "\n".join(x for x in lines if read_line(x) is None and _HEADING.match(x) is None).rstrip().lstrip("\n")
        shown = "\n\n".join(e.shown() for e in found)
        return _BLANK_RUNS.sub("\n\n", f"{rest}\n\n" if rest else "") + f"{HEADING}\n\n{shown}\n"

    def contradicts(self, a: Op, b: Op) -> bool:
        """Two examples of one input with different answers; other ops are asked of `rules`."""
        if a.key.startswith(PREFIX) and b.key.startswith(PREFIX) and a.scope is b.scope is Scope.KEY:
            first, second = read_line(a.new or ""), read_line(b.new or "")
            return a.key == b.key and first is not None and second is not None and first.answer != second.answer
        return self.rules.contradicts(a, b)

    # -- hooks -------------------------------------------------------------------------------------------------

    def _example(self, question: str, answer: str) -> Example:
        return make_example(question, answer, max_input=self.max_input, max_answer=self.max_answer)

    def _free_text(self, text: str) -> list[Edit]:
        return [Edit(Action.ADD, self._example(q, a).line()) for q, a in split_proposal(text)[0]]

    def _mapping(self, mapping: Mapping[str, Any]) -> list[Edit]:
        edits = []
        for question, answer in mapping.items():
            if answer is None:
                edits.append(Edit(Action.DELETE, target=question))
            elif isinstance(answer, str):
                edits.append(Edit(Action.ADD, self._example(question, answer).line()))
            else:
                raise InvalidProposalError(f"{self.name}: the answer to {question[:40]!r} must be a string or None, "
                                           f"got {type(answer).__name__}")
        return edits

    def _unit(self, content: str) -> str:
        pairs, rest = split_proposal(content.strip())
        if len(pairs) != 1 or _has_rules(rest):
            raise InvalidProposalError(f"{self.name}: {content[:80]!r} is not exactly one example")
        return self._example(*pairs[0]).line()

    def _target_key(self, target: str) -> str:
        name = normalise(target)
        return name if _KEY.fullmatch(name) else example_key(clip(question_of(target), self.max_input))

    def _merge(self, old: str, new: str) -> str | None:
        return None if read_line(old) == read_line(new) else new

    def _add_new(self, planner: Planner, new: str, at: int | None) -> None:
        """Insert after `at`'s unit, else after the last example, else after an ``Examples`` heading, else at the
        end; at the cap, first delete the oldest examples."""
        anchor = None if at is None else planner.doc.segments[at - 1].key
        while len(self._held(planner)) >= self.max_examples:
            planner.push(Op.delete(self.scope, planner.text_at(self._held(planner)[0])))
        index = -1 if anchor is None else planner.find(anchor)
        after = [index] if index >= 0 else self._held(planner) or self._held(planner, _HEADING.match)
        planner.push(Op.add(self.scope, new, at=after[-1] + 1 if after else None))

    @staticmethod
    def _held(planner: Planner, test: Callable[[str], object] = read_line) -> list[int]:
        """Indexes of the lines of the working document that pass `test` (by default: the examples)."""
        return [i for i, s in enumerate(planner.doc.segments) if test(s.text) is not None]


def gold_text(expected: object) -> str:
    """A gold answer as one line of text: strings as they are, other values as JSON."""
    text = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
    return " ".join(text.split())


def demo_from_failure(task: Task, output: object = None, reward: float = 0.0, *, max_input: int = MAX_INPUT,
                      max_answer: int = MAX_ANSWER) -> str | None:
    """The proposal text of one demonstration built from a failed task: its input and its gold answer.

    No model is needed. None when the task has no gold (`expected` is None), its input is blank, the gold is
    longer than `max_answer`, or the task did not fail (`reward` >= 1). `output` is not used.

    >>> from agentgrad.data.task import Task
    >>> print(demo_from_failure(Task("t1", "Where is my parcel?", "MZV-2"), "KTR-4", 0.0))
    Input: Where is my parcel?
    Answer: MZV-2
    """
    if task.expected is None or reward >= 1.0:
        return None
    question, answer = clip(task.input, max_input), gold_text(task.expected)
    if not question or not answer or len(answer) > max_answer:
        return None
    return f"Input: {question}\nAnswer: {answer}"


def propose_demo(rendered: str, task: Task, output: object, reward: float) -> str | None:
    """`demo_from_failure` in the shape of `evolve`'s ``propose=`` (the rendered skill is not used)."""
    return demo_from_failure(task, output, reward)

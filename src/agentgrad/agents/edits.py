"""What a proposer's reply must hold: structured edits (`parse_edits`) or one rule (`parse_rule`); find it, check it,
say what is wrong."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentgrad.errors import InvalidProposalError

ACTIONS = ("add", "replace", "delete")
MAX_CONTENT = 2000
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def _json_object(reply: str) -> Any:
    fenced = _FENCE.search(reply)
    candidates = [fenced.group(1)] if fenced else []
    start, end = reply.find("{"), reply.rfind("}")
    if start >= 0 and end > start:
        candidates.append(reply[start:end + 1])
    for text in candidates:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    raise InvalidProposalError(f"no JSON object found in the reply: {reply[:200]!r}")


def _check_edit(index: int, edit: Any) -> dict[str, str]:
    if not isinstance(edit, dict):
        raise InvalidProposalError(f"edit {index} must be an object, got {type(edit).__name__}")
    action, content = edit.get("action"), edit.get("content")
    if action not in ACTIONS:
        raise InvalidProposalError(f"edit {index}: action must be one of {ACTIONS}, got {action!r}")
    if not isinstance(content, str) or not content.strip() or "\n" in content.strip():
        raise InvalidProposalError(f"edit {index}: content must be one non-empty line of text, got {content!r}")
    if len(content) > MAX_CONTENT:
        raise InvalidProposalError(f"edit {index}: content is {len(content)} characters (limit {MAX_CONTENT})")
    out = {"action": action, "content": content.strip()}
    target = edit.get("target")
    if action != "add":
        if not isinstance(target, str) or not target.strip():
            raise InvalidProposalError(f"edit {index}: a {action} needs the existing rule in 'target'")
        out["target"] = target.strip()
    return out


def parse_edits(reply: str, *, max_edits: int = 3) -> list[dict[str, str]]:
    """The edits in a model's reply, validated; `InvalidProposalError` says exactly what is wrong."""
    data = _json_object(reply)
    if not isinstance(data, dict) or not isinstance(data.get("edits"), list):
        raise InvalidProposalError('the reply must be an object with an "edits" list')
    edits = data["edits"]
    if len(edits) > max_edits:
        raise InvalidProposalError(f"{len(edits)} edits; at most {max_edits} are allowed")
    return [_check_edit(i, e) for i, e in enumerate(edits)]


MAX_RULE = 300
RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"rule": {"type": "string", "minLength": 8, "maxLength": 200}},
    "required": ["rule"],
    "additionalProperties": False,
}
"""The JSON schema of a one-rule reply, ``{"rule": "..."}``: pass it as llama.cpp's ``json_schema`` parameter (or
inside an OpenAI ``response_format``) and the server's grammar makes every reply fit."""

_MARKS = "-*•\"'` "


def _rule_text(reply: str) -> str:
    text = reply.strip()
    if text.startswith("{") or _FENCE.search(text):
        try:
            data = _json_object(text)
        except InvalidProposalError:
            raise InvalidProposalError(f"the reply starts a JSON object but is not one (cut off?): {text[:200]!r}")\
                from None
        if not isinstance(data, dict) or not isinstance(data.get("rule"), str):
            raise InvalidProposalError(f'the reply must be an object with a "rule" string, got {text[:200]!r}')
        return str(data["rule"])
    return next((line for line in text.splitlines() if line.strip(_MARKS)), "")


def parse_rule(reply: str, *, echoes: Sequence[str] = (), min_words: int = 3, max_words: int = 40) -> str:
    """The one rule in a model's reply: ``{"rule": "..."}``, or else the first non-empty line of plain text.

    The rule must be one line of `min_words` to `max_words` words (at most `MAX_RULE` characters) and must not
    repeat any of `echoes` (the prompt's worked examples, the expected answer, the model's own output), compared
    without case, spaces or end punctuation. `InvalidProposalError` says which check failed.
    """
    rule = _rule_text(reply).strip().strip(_MARKS).strip()
    if not rule:
        raise InvalidProposalError("the proposer replied with no rule")
    if "\n" in rule or "\r" in rule:
        raise InvalidProposalError(f"a rule is one line, got {rule[:120]!r}")
    words = len(rule.split())
    if not min_words <= words <= max_words or len(rule) > MAX_RULE:
        raise InvalidProposalError(f"a rule has {min_words} to {max_words} words and at most {MAX_RULE} characters, "
                                   f"got {words} words: {rule[:120]!r}")
    key = _plain(rule)
    for echo in echoes:
        if key == _plain(echo):
            raise InvalidProposalError(f"the rule only repeats {echo[:80]!r} from the prompt")
    return rule


def check_general(rule: str, answers: Sequence[str]) -> None:
    """Refuse a rule that names exactly one of several distinct expected answers shown with the failure.

    Such a rule ("Answer with only one word: positive.") fits one task, not the kind of task: on a classification
    it pushes every answer to one label. Words are matched whole and without case; a rule that names none of the
    answers, or two or more ("positive or negative"), passes, and so does any rule when fewer than two distinct
    answers were shown.
    """
    distinct = list(dict.fromkeys(_plain(a) for a in answers if _plain(a)))
    named = [a for a in distinct if _names(rule, a)]
    if len(distinct) >= 2 and len(named) == 1:
        others = ", ".join(a for a in distinct if a != named[0])
        raise InvalidProposalError(f"the rule names one expected answer ({named[0]!r}) but none of the others shown "
                                   f"({others}): it fits one task, not the kind: {rule[:120]!r}")


def _names(rule: str, answer: str) -> bool:
    words = _plain(answer)
    return bool(words) and re.search(r"(?<!\w)" + re.escape(words) + r"(?!\w)", _plain(rule)) is not None


def _plain(text: str) -> str:
    return " ".join(text.split()).strip().rstrip(".!;:").strip().casefold()

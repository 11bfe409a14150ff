"""Structured edits from a model's reply: find the JSON, check it against the schema, say what is wrong."""

from __future__ import annotations

import json
import re
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

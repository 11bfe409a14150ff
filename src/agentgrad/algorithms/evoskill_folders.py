"""EvoSkill's skill folders as markdown sections, and the parsing of its proposer's and skill writer's replies.

A skill folder (EvoSkill's ``.claude/skills/<name>/SKILL.md``) is one section of a `Sections` artifact:

    ## <name>
    description: <when the skill applies>

    <instructions>

The name is a lowercase-hyphen slug (as EvoSkill's skill writer requires); the body holds no further heading (a
section has one), so headings a writer puts inside a body become plain lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentgrad.algorithms.base import fenced
from agentgrad.core.units import Scope, parse
from agentgrad.errors import InvalidProposalError

ACTIONS = ("create", "edit")
DESCRIPTION = "description:"
_HEADING = re.compile(r"^\s*#+\s*")
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True)
class SkillProposal:
    """The proposer's answer: create a skill or edit `target`, what it must say, and why."""

    action: str
    target: str | None
    proposed: str
    justification: str


def slug(name: str) -> str:
    """A skill name as EvoSkill writes one: lowercase words joined by hyphens."""
    words = re.findall(r"[a-z0-9]+", name.casefold())
    return "-".join(words)


def folders(text: str) -> dict[str, str]:
    """The skill folders of a skills text, by name (slug of the heading), in their order."""
    out: dict[str, str] = {}
    for segment in parse(Scope.SECTION, text).segments:
        if segment.key is not None:
            out[slug(_HEADING.sub("", segment.text.split("\n")[0]))] = segment.text.strip("\n")
    return out


def describe(folder: str) -> str:
    """The folder's description line, without its label (empty if it has none)."""
    for line in folder.split("\n")[1:]:
        if line.strip().casefold().startswith(DESCRIPTION):
            return line.strip()[len(DESCRIPTION):].strip()
    return ""


def folder(name: str, body: str, description: str) -> str:
    """A skill folder named `name` holding `body` (a description line first: `description` if `body` has none)."""
    lines = [_HEADING.sub("", line) if _HEADING.match(line) else line.rstrip() for line in body.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not any(line.strip().casefold().startswith(DESCRIPTION) for line in lines):
        lines = [f"{DESCRIPTION} {' '.join(description.split())[:160]}", "", *lines]
    return "\n".join([f"## {name}", *lines]).rstrip()


def parse_proposal(reply: str, known: Mapping[str, str]) -> SkillProposal:
    """The proposer's JSON reply, checked: an edit must name a skill in `known`; `InvalidProposalError` if not."""
    match = _OBJECT.search(fenced(reply))
    try:
        data: Any = json.loads(match.group(0)) if match else None
    except json.JSONDecodeError as exc:
        raise InvalidProposalError(f"evoskill: the proposer's reply is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidProposalError(f"evoskill: the proposer's reply holds no JSON object: {reply[:120]!r}")
    action, proposed = data.get("action", "create"), data.get("proposed_skill")
    if action not in ACTIONS or not isinstance(proposed, str) or not proposed.strip():
        raise InvalidProposalError(f"evoskill: a proposal needs an action in {ACTIONS} and a proposed_skill, "
                                   f"got {str(data)[:160]}")
    target = data.get("target_skill")
    if action == "edit":
        target = slug(str(target or ""))
        if target not in known:
            raise InvalidProposalError(f"evoskill: an edit must name an existing skill {sorted(known)}, "
                                       f"got {data.get('target_skill')!r}")
    return SkillProposal(action, target if action == "edit" else None, proposed.strip(),
                         str(data.get("justification") or "").strip())


def parse_folder(reply: str, proposal: SkillProposal) -> str:
    """The skill writer's folder from its reply: an edit keeps the target's name; a new skill needs a heading."""
    text = fenced(reply).strip()
    first, _, body = text.partition("\n")
    name = slug(_HEADING.sub("", first)) if _HEADING.match(first) else ""
    if proposal.target is not None:
        name, body = proposal.target, body if name else text
    if not name or not body.strip():
        raise InvalidProposalError(f"evoskill: the skill writer's reply is no skill folder (a '## name' line, "
                                   f"then instructions): {text[:120]!r}")
    return folder(name, body, proposal.proposed)


def edits_towards(head: Mapping[str, str], wanted: Mapping[str, str]) -> list[dict[str, str]]:
    """Structured `Sections` edits that turn the head's folders into `wanted` (deletes, then adds)."""
    edits = [{"action": "delete", "target": text.split("\n")[0]} for name, text in head.items() if name not in wanted]
    edits += [{"action": "add", "content": text} for name, text in wanted.items() if head.get(name) != text]
    return edits

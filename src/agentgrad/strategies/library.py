"""`LibraryStrategy`: proposals that edit any writable member of a library, each member with its own strategy.

A proposal names the member it edits in one of three ways:

- a dict of member ids to proposals: ``{"system": "Answer in one word.", "skill": "- check the units"}``;
- structured edits with an ``"artifact"`` field: ``[{"artifact": "skill", "action": "add", "content": "..."}]``;
- anything else (free text, edits without ``"artifact"``) goes to the default member: the one given, or the only
  writable member; with several writable members and no default, such a proposal is refused, saying so.

Every op it makes names its member (`Op.member`), so the ops apply to the packed library text
(`agentgrad.core.library`). An edit of an L0 member is refused: the agent sees L0 artifacts, nothing changes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgrad.core.artifact import Layer
from agentgrad.core.library import unpack
from agentgrad.core.ops import Op
from agentgrad.core.units import Scope
from agentgrad.errors import ConfigError, InvalidProposalError
from agentgrad.strategies.base import DEFAULT_MAX_CHARS, RawProposal, Strategy, check_proposal

MEMBER_FIELD = "artifact"


@dataclass(frozen=True)
class LibraryStrategy:
    """Routes a proposal's edits to the library members they name.

    Args:
        strategies: each member's strategy (every member of the library needs one).
        layers: each member's layer; L0 members are shown to the agent and never edited.
        default: the member that takes free text and edits that name no member (None: the only writable one).
        max_chars: proposals with more characters than this are refused.
    """

    strategies: Mapping[str, Strategy]
    layers: Mapping[str, Layer]
    default: str | None = None
    max_chars: int = DEFAULT_MAX_CHARS
    scope: Scope = field(default=Scope.TEXT, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategies", dict(self.strategies))
        object.__setattr__(self, "layers", dict(self.layers))
        if set(self.strategies) != set(self.layers):
            raise ConfigError(f"library strategies {sorted(self.strategies)} and layers {sorted(self.layers)} "
                              "must name the same members")
        if self.default is not None and self.default not in self.strategies:
            raise ConfigError(f"the default member {self.default!r} is not in the library {sorted(self.strategies)}")

    name: str = field(default="library", init=False)

    def describe(self) -> str:
        """Each member's strategy, by id."""
        return ", ".join(f"{m}: {s.name}" for m, s in sorted(self.strategies.items()))

    def writable(self) -> list[str]:
        """The members a diff may edit (all but the L0 ones), sorted."""
        return sorted(m for m, layer in self.layers.items() if layer is not Layer.L0)

    def ops(self, proposal: RawProposal, text: str) -> tuple[Op, ...]:
        """The member-addressed ops that carry `proposal` out on packed `text`."""
        checked = check_proposal(proposal, self.max_chars, self.name)
        texts = unpack(text)
        ops: list[Op] = []
        for member, part in sorted(self._route(checked).items()):
            if member not in texts:
                raise InvalidProposalError(f"{self.name}: {member!r} is not an artifact of the library "
                                           f"(artifacts: {sorted(texts)})")
            if self.layers.get(member) is Layer.L0:
                raise InvalidProposalError(f"{self.name}: {member!r} is in layer L0 (frozen): the agent sees it, "
                                           "but no edit may change it")
            ops += [op.within(member) for op in self.strategies[member].ops(part, texts[member])]
        return tuple(ops)

    def render(self, text: str) -> dict[str, str]:
        """What the agent sees: each member's rendered text, by id (L0 members included)."""
        out: dict[str, str] = {}
        for member, inner in unpack(text).items():
            rendered = self.strategies[member].render(inner)
            out[member] = rendered if isinstance(rendered, str) else str(dict(rendered))
        return out

    def contradicts(self, a: Op, b: Op) -> bool:
        """Two ops of one member that its strategy finds contradictory."""
        if a.member is None or a.member != b.member or a.member not in self.strategies:
            return False
        return self.strategies[a.member].contradicts(a.bare(), b.bare())

    # -- routing -----------------------------------------------------------------------------------------------

    def _route(self, proposal: RawProposal) -> dict[str, Any]:
        if isinstance(proposal, Mapping) and "action" not in proposal and MEMBER_FIELD not in proposal:
            unknown = sorted(k for k in proposal if k not in self.strategies)
            if unknown:
                raise InvalidProposalError(f"{self.name}: a dict proposal maps artifact ids to proposals; "
                                           f"{unknown[:5]} name no artifact of the library")
            return dict(proposal)
        if isinstance(proposal, str):
            return {self._default(): proposal}
        items: Sequence[Any] = [proposal] if isinstance(proposal, Mapping) else list(proposal)
        routed: dict[str, list[dict[str, Any]]] = {}
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidProposalError(f"{self.name}: edit #{index + 1} must be a dict, got "
                                           f"{type(item).__name__}")
            member = item.get(MEMBER_FIELD)
            if member is not None and not isinstance(member, str):
                raise InvalidProposalError(f"{self.name}: edit #{index + 1}: '{MEMBER_FIELD}' must be an id")
            rest = {k: v for k, v in item.items() if k != MEMBER_FIELD}
            routed.setdefault(member or self._default(), []).append(rest)
        return dict(routed)

    def _default(self) -> str:
        if self.default is not None:
            return self.default
        writable = self.writable()
        if len(writable) != 1:
            raise InvalidProposalError(
                f"{self.name}: say which artifact the edit is for (an '{MEMBER_FIELD}' field, or a dict of ids to "
                f"proposals); the library has {len(writable)} writable artifacts: {writable}")
        return writable[0]

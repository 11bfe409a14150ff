"""The parameters: named text artifacts, their layers (blast radius) and their versions."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import Enum

from agentgrad.core._checks import member, text
from agentgrad.core.ids import validate_id
from agentgrad.errors import InvalidOpError


class Kind(str, Enum):
    """What an artifact is for. The kind sets the default layer."""

    PROMPT = "prompt"
    SKILL = "skill"
    HARNESS = "harness"
    VERIFIER = "verifier"
    MEMORY = "memory"
    LIBRARY = "library"  # the packed texts of a library's members (`agentgrad.core.library`)


class Layer(str, Enum):
    """Blast radius of a change.

    L2 (skills, prompts, memory) merge freely; L1 (harness, verifiers) are serialized, one change in flight, and
    need a full held-out check; L0 (safety, permissions, oracle, audit budget) is frozen: nothing may change it.
    """

    L0 = "L0"
    L1 = "L1"
    L2 = "L2"


_DEFAULT_LAYER = {
    Kind.PROMPT: Layer.L2,
    Kind.SKILL: Layer.L2,
    Kind.MEMORY: Layer.L2,
    Kind.HARNESS: Layer.L1,
    Kind.VERIFIER: Layer.L1,
    Kind.LIBRARY: Layer.L2,  # its members' layers govern it (`optim.governance`)
}


def default_layer(kind: Kind) -> Layer:
    """The layer an artifact of `kind` gets unless it is set explicitly."""
    return _DEFAULT_LAYER[kind]


def content_hash(text: str) -> str:
    """Content address of a text: hex SHA-256 of its UTF-8 bytes (lone surrogates are refused)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidOpError(f"text is not valid Unicode (lone surrogate at {exc.start})") from exc
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Artifact:
    """One named text parameter.

    Args:
        id: a safe relative path such as ``"skills/sentiment"`` (see `validate_id`).
        kind: prompt, skill, harness, verifier or memory.
        text: the current text.
        layer: blast radius; defaults from the kind. Mark safety, permissions and oracles as `Layer.L0`.
    """

    id: str
    kind: Kind
    text: str
    layer: Layer | None = None

    def __post_init__(self) -> None:
        validate_id(self.id)
        object.__setattr__(self, "kind", member(self.kind, f"artifact {self.id!r}: kind", Kind, error=InvalidOpError))
        layer = (default_layer(self.kind) if self.layer is None else
                 member(self.layer, f"artifact {self.id!r}: layer", Layer, error=InvalidOpError))
        object.__setattr__(self, "layer", layer)
        text(self.text, f"artifact {self.id!r}: text", empty=True, error=InvalidOpError)
        content_hash(self.text)

    @property
    def frozen(self) -> bool:
        """True for L0 artifacts, which no diff may touch."""
        return self.layer is Layer.L0


@dataclass(frozen=True)
class Version:
    """One committed state of an artifact: version numbers start at 0 (the initial text) and grow by one."""

    artifact_id: str
    number: int
    text: str
    diff_id: str | None = None
    hash: str = field(default="")

    def __post_init__(self) -> None:
        validate_id(self.artifact_id)
        if self.number < 0:
            raise InvalidOpError(f"version numbers start at 0, got {self.number}")
        if not self.hash:
            object.__setattr__(self, "hash", content_hash(self.text))

"""A library: several artifacts evolved together, and the packed text that stands for all of them in a run.

A run over a library keeps one extra artifact of kind `Kind.LIBRARY` whose text packs the members' texts (a
header line, then JSON ``{id: text}`` with sorted keys), so every part of the engine that scores, caches and
rebases "a text" works unchanged; its ops name the member they edit (`Op.member`). Each commit of the packed
artifact is mirrored, in the same transaction, by commits of the members it changed (`store.commit`), so every
member keeps its own history, git file and layer.

>>> packed = pack({"b": "two", "a": "one"})
>>> unpack(packed)
{'a': 'one', 'b': 'two'}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from agentgrad.core._checks import items
from agentgrad.core.artifact import Artifact, Kind, Layer
from agentgrad.errors import ConfigError, InvalidOpError

HEADER = "agentgrad-library/1\n"
LIBRARY_ID = "library"


def pack(texts: Mapping[str, str]) -> str:
    """The packed text of members `texts` (deterministic: equal mappings pack to equal text)."""
    return HEADER + json.dumps(dict(sorted(texts.items())), ensure_ascii=False, indent=0)


def is_packed(text: str) -> bool:
    """True when `text` is a packed library."""
    return text.startswith(HEADER)


def unpack(text: str) -> dict[str, str]:
    """The members' texts packed in `text`; `InvalidOpError` if it is no packed library."""
    if not is_packed(text):
        raise InvalidOpError("the text is not a packed library (its first line is not the library header)")
    try:
        data = json.loads(text[len(HEADER):])
    except json.JSONDecodeError as exc:
        raise InvalidOpError(f"the packed library is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InvalidOpError("a packed library must map member ids to texts")
    return data


def changed_members(old: str, new: str) -> frozenset[str]:
    """The members whose text differs between packed texts `old` and `new` (a member added or dropped counts)."""
    before, after = unpack(old), unpack(new)
    return frozenset(m for m in before.keys() | after.keys() if before.get(m) != after.get(m))


def member_text(text: str, member: str) -> str:
    """The text of `member` in packed `text`; `InvalidOpError` naming it if it is not a member."""
    texts = unpack(text)
    if member not in texts:
        raise InvalidOpError(f"{member!r} is not a member of the library (members: {sorted(texts)})")
    return texts[member]


def with_member(text: str, member: str, new: str) -> str:
    """Packed `text` with the text of `member` set to `new`."""
    texts = unpack(text)
    if member not in texts:
        raise InvalidOpError(f"{member!r} is not a member of the library (members: {sorted(texts)})")
    texts[member] = new
    return pack(texts)


@dataclass(frozen=True)
class Library:
    """Artifacts evolved together: a diff may edit any writable member, and a change of several commits at once.

    Build one from artifacts, or from a mapping of ids to artifacts or texts (a text becomes a skill):

    >>> lib = Library.of({"system": Artifact("system", Kind.PROMPT, "Be brief."), "skill": "- check units"})
    >>> lib.ids
    ('skill', 'system')
    """

    members: tuple[Artifact, ...]

    def __post_init__(self) -> None:
        members = items(self.members, "Library.members", Artifact)
        if not members:
            raise ConfigError("a library needs at least one artifact")
        ids = [m.id for m in members]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"a library's artifact ids must be unique, got {ids}")
        if LIBRARY_ID in ids:
            raise ConfigError(f"{LIBRARY_ID!r} is the packed library's own id; name the member otherwise")
        if any(m.kind is Kind.LIBRARY for m in members):
            raise ConfigError("a library cannot hold another library")
        if all(m.frozen for m in members):
            raise ConfigError("every artifact of the library is in layer L0 (frozen): nothing could be learned")
        object.__setattr__(self, "members", tuple(sorted(members, key=lambda m: m.id)))

    @classmethod
    def of(cls, artifacts: Library | Mapping[str, Artifact | str] | Iterable[Artifact]) -> Library:
        """A library of `artifacts` (ids to artifacts or texts, or artifacts); `ConfigError` for anything else."""
        if isinstance(artifacts, Library):
            return artifacts
        if isinstance(artifacts, Mapping):
            return cls(tuple(_member(key, value) for key, value in artifacts.items()))
        if isinstance(artifacts, (str, bytes)) or not isinstance(artifacts, Iterable):
            raise ConfigError("a library is built from Artifact values, or a mapping of ids to artifacts or texts, "
                              f"got {type(artifacts).__name__}")
        given = list(artifacts)
        if not all(isinstance(a, Artifact) for a in given):
            raise ConfigError("a library is built from Artifact values, or a mapping of ids to artifacts or texts")
        return cls(tuple(given))

    @property
    def ids(self) -> tuple[str, ...]:
        """The members' ids, sorted."""
        return tuple(m.id for m in self.members)

    def __iter__(self) -> Iterator[Artifact]:
        return iter(self.members)

    def __getitem__(self, artifact_id: str) -> Artifact:
        for member in self.members:
            if member.id == artifact_id:
                return member
        raise KeyError(artifact_id)

    def layers(self) -> dict[str, Layer]:
        """Each member's layer."""
        return {m.id: m.layer or Layer.L2 for m in self.members}

    def packed(self) -> Artifact:
        """The artifact a run evolves in the members' stead (kind LIBRARY, id ``"library"``)."""
        return Artifact(LIBRARY_ID, Kind.LIBRARY, pack({m.id: m.text for m in self.members}))


def _member(key: object, value: Artifact | str) -> Artifact:
    if isinstance(value, Artifact):
        if value.id != key:
            raise ConfigError(f"library key {key!r} names artifact {value.id!r}; use the artifact's id as its key")
        return value
    if isinstance(value, str) and isinstance(key, str):
        return Artifact(key, Kind.SKILL, value)
    raise ConfigError(f"library member {key!r} must be an Artifact or a text, got {type(value).__name__}")

"""Bearer tokens: read from a JSON file or an environment variable, kept as SHA-256 hashes only (at rest and in
memory), each with scopes ("read", "write") and a limit of active jobs.

The tokens document is ``{"tokens": [{"name": "ci", "sha256": "<hex>", "scopes": ["read", "write"],
"max_jobs": 2}]}``; `new_entry` makes one for a fresh random token (`agentgrad serve --new-token NAME` prints the
token once and stores only its hash). A write token may also read. Tokens are long random strings, so a plain
SHA-256 is a sound hash for them (as for API keys); comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgrad.errors import ConfigError

TOKENS_ENV = "AGENTGRAD_SERVICE_TOKENS"
READ, WRITE = "read", "write"
SCOPES = (READ, WRITE)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest a token is stored as."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: a token's name, its scopes and how many active jobs it may have."""

    name: str
    scopes: frozenset[str]
    max_jobs: int

    def can(self, scope: str) -> bool:
        """True if the caller holds `scope` (write implies read)."""
        return scope in self.scopes or (scope == READ and WRITE in self.scopes)


@dataclass(frozen=True)
class TokenEntry:
    """One token as stored: its hash, never the token."""

    name: str
    sha256: str
    scopes: frozenset[str]
    max_jobs: int | None = None


def _entry(raw: Any, where: str) -> TokenEntry:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each token is a table, got {type(raw).__name__}")
    digest, name, scopes = raw.get("sha256"), raw.get("name"), raw.get("scopes", [READ])
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: every token needs a 'name'")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ConfigError(f"{where}: token {name!r} needs 'sha256', the 64 hex digits of the token's hash")
    if not isinstance(scopes, list) or not scopes or any(s not in SCOPES for s in scopes):
        raise ConfigError(f"{where}: token {name!r} has scopes {scopes!r}; expected a list of {list(SCOPES)}")
    limit = raw.get("max_jobs")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"{where}: token {name!r} has max_jobs {limit!r}; expected an int >= 1")
    return TokenEntry(name, digest, frozenset(scopes), limit)


def parse_tokens(text: str, where: str) -> list[TokenEntry]:
    """The entries of a tokens document (`ConfigError` saying what is wrong)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc})") from exc
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, list):
        raise ConfigError(f"{where}: expected {{\"tokens\": [...]}}")
    return [_entry(raw, where) for raw in tokens]


def load_tokens(path: Path | None, environ: Mapping[str, str] = os.environ) -> list[TokenEntry]:
    """The tokens of the file at `path` (if given) and of the ``AGENTGRAD_SERVICE_TOKENS`` variable (if set)."""
    entries: list[TokenEntry] = []
    if path is not None:
        try:
            entries += parse_tokens(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ConfigError(f"cannot read the tokens file {path} ({exc})") from exc
    if environ.get(TOKENS_ENV):
        entries += parse_tokens(environ[TOKENS_ENV], TOKENS_ENV)
    return entries


def new_entry(name: str, scopes: Sequence[str], max_jobs: int | None = None) -> tuple[str, dict[str, Any]]:
    """A fresh random token and the entry that stores its hash."""
    token = secrets.token_urlsafe(32)
    entry: dict[str, Any] = {"name": name, "sha256": hash_token(token), "scopes": list(scopes)}
    if max_jobs is not None:
        entry["max_jobs"] = max_jobs
    _entry(entry, "new token")
    return token, entry


def add_to_file(path: Path, entry: Mapping[str, Any]) -> None:
    """Append a token entry to a tokens file (created if missing)."""
    data: dict[str, Any] = {"tokens": []}
    if path.exists():
        parse_tokens(path.read_text(encoding="utf-8"), str(path))
        data = json.loads(path.read_text(encoding="utf-8"))
    data["tokens"].append(dict(entry))
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    path.chmod(0o600)


class TokenBook:
    """The tokens the service accepts; `check` turns a presented token into its `Principal` (or None)."""

    def __init__(self, entries: Sequence[TokenEntry], *, default_max_jobs: int) -> None:
        self._entries = list(entries)
        self._default = default_max_jobs

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, token: str) -> Principal | None:
        """The principal of a valid token, else None (every entry is compared, in constant time)."""
        digest = hash_token(token)
        found: TokenEntry | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.sha256, digest):
                found = entry
        if found is None:
            return None
        return Principal(found.name, found.scopes, found.max_jobs or self._default)

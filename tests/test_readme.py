"""The README's Python examples run as written, with no network and no key, and import only the public API.

A block that cannot run here (a template, or one that needs a model or a key) says so on the line above it:
``<!-- README test: not run (why) -->``. Each other block runs on its own, in a fresh namespace and a fresh working
directory; a traceback points at the README's own line numbers.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PUBLIC = {"agentgrad", "agentgrad.optim", "agentgrad.testing", "agentgrad.providers", "agentgrad.algorithms"}
NOT_RUN = re.compile(r"<!-- README test: not run \((?P<why>[^)]+)\) -->")
KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY")


@dataclass(frozen=True)
class Block:
    line: int  # the line of the README the code starts on
    code: str
    not_run: str | None  # why it is not run, from the marker above it


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"^```python\n(.*?)^```$", text, re.S | re.M):
        above = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.fullmatch(above.strip())
        found.append(Block(text.count("\n", 0, match.start()) + 2, match.group(1),
                           marker.group("why") if marker else None))
    return found


BLOCKS = blocks()


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network, no key, and a fresh working directory (the examples write their runs under ./runs)."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("a README example tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


def test_the_readme_has_runnable_python_examples() -> None:
    assert sum(block.not_run is None for block in BLOCKS) >= 3
    assert "<!-- README test" not in "".join(block.code for block in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{block.line}" for block in BLOCKS])
def test_a_readme_example_imports_only_the_public_api(block: Block) -> None:
    modules = re.findall(r"^\s*(?:from|import)\s+(agentgrad[\w.]*)", block.code, re.M)
    assert modules, "a README example that does not use agentgrad"
    assert set(modules) <= PUBLIC, f"deep imports: {sorted(set(modules) - PUBLIC)}; import from {sorted(PUBLIC)}"


@pytest.mark.usefixtures("offline")
@pytest.mark.parametrize("block", BLOCKS, ids=[f"README.md:{block.line}" for block in BLOCKS])
def test_a_readme_example_runs_as_written(block: Block) -> None:
    if block.not_run is not None:
        pytest.skip(f"README.md:{block.line} is marked not run: {block.not_run}")
    code = compile("\n" * (block.line - 1) + block.code, str(README), "exec")
    exec(code, {"__name__": "__readme__"})

"""The library, section-parallel and pipeline examples run to the end on both runtimes and learn."""

from __future__ import annotations

import runpy
import sys
import tempfile
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"


@pytest.mark.parametrize("name", ["library_demo", "sections_demo", "pipeline_demo"])
@pytest.mark.parametrize("runtime", [[], ["--async"]], ids=["sync", "async"])
def test_the_example_runs_and_learns(name: str, runtime: list[str], monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "argv", [name, *runtime])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example keeps its run folder: not in /tmp
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "run ok" in out
    held_out = out.split("held-out reward", 1)[1].split("\n", 1)[0]
    before, after = (float(x) for x in held_out.rsplit(": ", 1)[1].split(" -> "))
    assert after > before

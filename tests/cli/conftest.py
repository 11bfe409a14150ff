"""Run directories shared by the CLI tests: a finished run and a run killed (SIGKILL) after its second commit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import ROOT, cli, world_config


@pytest.fixture(scope="session")
def finished_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("finished")
    result = cli("run", world_config(folder), "--run-dir", folder / "run", "--quiet")
    assert result.exit_code == 0, result.output
    return folder / "run"


@pytest.fixture
def finished_run(finished_template: Path, tmp_path: Path) -> Path:
    """A copy of a finished run (tests may change it)."""
    return Path(shutil.copytree(finished_template, tmp_path / "finished"))


@pytest.fixture(scope="session")
def killed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("killed")
    run_dir = folder / "run"
    script = Path(__file__).with_name("killed_run.py")
    done = subprocess.run([sys.executable, str(script), str(world_config(folder)), str(run_dir), "commit:2"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == -9, done.stderr
    return run_dir


@pytest.fixture
def killed_run(killed_template: Path, tmp_path: Path) -> Path:
    """A copy of a run whose process was killed (SIGKILL) right after its second commit was logged."""
    return Path(shutil.copytree(killed_template, tmp_path / "killed"))

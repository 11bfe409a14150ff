"""The CLI on a library run: show, diff, export and report work per artifact; the packed library stays inside."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgrad import Budget, evolve
from agentgrad.testing.library_world import LOWERCASE, LibraryWorld
from tests.cli.helpers import cli

WORLD = LibraryWorld(seed=3)


@pytest.fixture(scope="module")
def library_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("library") / "run"
    result = evolve(WORLD.tasks(), WORLD.reward, run=WORLD.run, propose=WORLD.propose, artifact=WORLD.library(),
                    budget=Budget(calls=400), workers=4, asynchronous=False, store=run_dir, seed=1)
    assert result.ok, result.error
    return run_dir


def test_show_and_diff_take_the_artifact_by_name(library_run: Path) -> None:
    shown = cli("show", library_run, "system")
    assert shown.exit_code == 0 and LOWERCASE in shown.stdout
    changed = cli("diff", library_run, "0", "dev", "--artifact", "system")
    assert changed.exit_code == 0 and f"+{LOWERCASE}" in changed.stdout


def test_without_a_name_the_cli_lists_the_libraries_artifacts(library_run: Path) -> None:
    result = cli("show", library_run)
    assert result.exit_code != 0
    assert all(name in result.stderr for name in ("policy", "skill", "system", "verifier"))


def test_export_writes_one_file_per_artifact_and_not_the_packed_library(library_run: Path, tmp_path: Path) -> None:
    result = cli("export", library_run, tmp_path / "out", "--dev")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["policy", "skill", "system", "verifier"]
    assert LOWERCASE in (tmp_path / "out" / "system").read_text()


def test_the_report_counts_each_change_once_and_names_the_artifacts_it_touched(library_run: Path,
                                                                              tmp_path: Path) -> None:
    from agentgrad.cli.rundir import RunDir
    from agentgrad.cli.series import collect

    result = cli("report", library_run, "--out", tmp_path / "report")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "report" / "report.png").stat().st_size > 10_000
    data = collect(RunDir(library_run))
    assert data["artifact"] == "library"
    ops = [op for row in data["lineage"] for op in row.get("ops", [])]
    assert any(op.startswith("system: add") for op in ops) and any(op.startswith("skill: add") for op in ops)
    assert data["decisions"].get("accepted", 0) == len(data["lineage"]) - 1

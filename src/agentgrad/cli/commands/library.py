"""`promote` (stable := dev), `export` (the stable library as plain files) and `fsck` (check a run directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentgrad.cli.commands.running import RunDirArg
from agentgrad.cli.output import FAILED, USAGE, emit_json, fail, guarded, say
from agentgrad.cli.rundir import RunDir, RunDirError
from agentgrad.core.artifact import Kind


@guarded
def promote(run_dir: RunDirArg,
            artifacts: Annotated[list[str] | None, typer.Argument(help="Artifacts to promote (default: all).")] = None,
            as_json: Annotated[bool, typer.Option("--json", help="Print the promoted versions as JSON.")] = False
            ) -> None:
    """Move the stable head of each artifact to its dev head (the git mirror's stable branch follows)."""
    target = RunDir(run_dir)
    with target.store(git=True) as store:
        before = {a: v.number for a, v in store.heads("stable").items()}
        if not before:
            raise RunDirError("the run has no artifact yet (it stopped before it started)")
        promoted = store.promote(artifacts or None)
    if as_json:
        emit_json({"promoted": promoted, "before": {a: before[a] for a in promoted}})
        return
    for artifact, number in promoted.items():
        moved = "unchanged" if before[artifact] == number else f"v{before[artifact]} -> v{number}"
        say(f"stable {artifact}: {moved}")


def _destination(dest: Path, artifact_id: str) -> Path:
    """Where an artifact's file goes: its id as a relative path under `dest` (ids cannot leave it)."""
    path = (dest / artifact_id).resolve()
    if not path.is_relative_to(dest.resolve()):
        raise RunDirError(f"artifact id {artifact_id!r} would be written outside {dest}")
    return path


@guarded
def export(run_dir: RunDirArg,
           dest: Annotated[Path, typer.Argument(help="The folder to write the files into.", show_default=False)],
           dev: Annotated[bool, typer.Option("--dev", help="Export the dev heads instead of stable.")] = False
           ) -> None:
    """Write the stable library as plain files: one file per artifact, its path the artifact id (a library run's
    packed artifact is not written: its members are)."""
    if dest.exists() and not dest.is_dir():
        fail(f"{dest} exists and is not a folder", USAGE)
    target = RunDir(run_dir)
    branch = "dev" if dev else "stable"
    with target.store() as store:
        heads = {a: v for a, v in store.heads(branch).items() if store.artifact(a).kind is not Kind.LIBRARY}
    if not heads:
        raise RunDirError("the run has no artifact yet (it stopped before it started)")
    for artifact_id, version in heads.items():
        path = _destination(dest, artifact_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(version.text, encoding="utf-8")
        say(f"{path} ({artifact_id} {branch} v{version.number})")


@guarded
def fsck(run_dir: RunDirArg,
         as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False) -> None:
    """Check a run directory without writing to it: the database, the log against the store, the calls, the git
    mirror. Exits non-zero if anything is wrong, and says what."""
    from agentgrad.store.fsck import fsck as check

    target = RunDir(run_dir)
    target.require()
    findings = check(target.path)
    if as_json:
        emit_json({"ok": all(f.ok for f in findings),
                   "findings": [{"check": f.check, "ok": f.ok, "detail": f.detail} for f in findings]})
    else:
        for finding in findings:
            say(f"{'ok' if finding.ok else 'DAMAGED'}  {finding.check}: {finding.detail}")
    if not all(f.ok for f in findings):
        raise typer.Exit(FAILED)

"""`report`: plots of a run (PNG) and a self-contained HTML page with the same data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentgrad.cli.commands.running import RunDirArg
from agentgrad.cli.output import emit_json, guarded, say
from agentgrad.cli.rundir import RunDir


@guarded
def report(run_dir: RunDirArg,
           out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for the files "
                                                    "(default: RUN_DIR/report).")] = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print the paths as JSON.")] = False) -> None:
    """Write report.png and report.html (reward, throughput, worker activity, decision mix, lineage)."""
    from agentgrad.cli.report import write_report
    from agentgrad.cli.series import collect

    target = RunDir(run_dir)
    target.require()
    png, page = write_report(collect(target), out or run_dir / "report")
    if as_json:
        emit_json({"png": str(png), "html": str(page)})
    else:
        say(f"wrote {png}\nwrote {page}")

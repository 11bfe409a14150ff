"""The `agentgrad` command line (typer): run, resume, status, log, show, diff, why, frontier, promote, export, fsck,
report, cancel.

`import agentgrad` never imports this module; the commands import the runtime, rich and matplotlib only when they
need them, so `agentgrad status` stays quick.
"""

from __future__ import annotations

import typer

from agentgrad.cli.commands import inspecting, library, reporting, running, serving

app = typer.Typer(name="agentgrad", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Improve an agent's text artifacts with evidence-carrying diffs; inspect and ship the result.")
app.command()(running.run)
app.command()(running.resume)
app.command()(inspecting.status)
app.command()(inspecting.log)
app.command()(inspecting.show)
app.command()(inspecting.diff)
app.command()(inspecting.why)
app.command()(inspecting.frontier)
app.command()(library.promote)
app.command()(library.export)
app.command()(library.fsck)
app.command()(reporting.report)
app.command()(running.cancel)
app.command()(serving.serve)


def main() -> None:
    """The console script's entry point."""
    app()

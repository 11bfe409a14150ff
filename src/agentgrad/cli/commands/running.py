"""`run`, `resume` and `cancel`: start a run from a configuration file, continue one, stop one cleanly.

A run's process writes its pid to ``RUN_DIR/run.pid``. Ctrl-C (SIGINT, or SIGTERM) cancels the run the way evolve
cancels: calls in flight are charged to the budget and logged, the store and the event log stay consistent, and
the process says how to resume. `run --detach` starts the run in a new session (it survives the terminal), with
its output in ``RUN_DIR/run.log``; `cancel` sends it SIGINT and waits for it to stop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentgrad.cli.config import ConfigSource, load_config, parse_config
from agentgrad.cli.output import FAILED, INTERRUPTED, OK, USAGE, emit_json, fail, guarded, say, warn
from agentgrad.cli.rundir import RunDir, process_alive
from agentgrad.core._checks import number
from agentgrad.errors import AgentgradError

if TYPE_CHECKING:
    from agentgrad.cli.launch import Callback
    from agentgrad.cli.schema import CliConfig
    from agentgrad.runtime.result import Result


class Mode(str, Enum):
    """How a run reports progress."""

    LIVE = "live"
    QUIET = "quiet"
    JSON = "json"


RunDirArg = Annotated[Path, typer.Argument(help="The run directory.", show_default=False)]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the final summary.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object per event, then a summary object.")]


def _mode(quiet: bool, as_json: bool) -> Mode:
    if quiet and as_json:
        fail("--quiet and --json exclude each other", USAGE)
    return Mode.JSON if as_json else Mode.QUIET if quiet else Mode.LIVE


@contextmanager
def _graceful_signals() -> Iterator[None]:
    """Make SIGINT raise KeyboardInterrupt (evolve's event loop turns it into a clean cancel) even when this
    process was started with SIGINT ignored, and treat SIGTERM as SIGINT; restore the handlers afterwards."""
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    old_term = signal.signal(signal.SIGTERM, lambda number, frame: signal.raise_signal(signal.SIGINT))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


@contextmanager
def _progress(mode: Mode, run_dir: Path) -> Iterator[list[Callback]]:
    if mode is Mode.JSON:
        from agentgrad.cli.progress import JsonProgress

        yield [JsonProgress(sys.stdout)]
    elif mode is Mode.QUIET:
        yield []
    else:
        from rich.console import Console

        from agentgrad.cli.progress import LiveProgress

        with LiveProgress(run_dir, Console(stderr=True)) as live:
            yield [live]


def _summary(result: Result, target: RunDir, mode: Mode) -> None:
    if mode is Mode.JSON:
        usage = result.usage
        emit_json({"event": "summary", "ok": result.ok, "error": None if result.ok else str(result.error),
                   "test_reward": result.test_reward, "baseline_test_reward": result.baseline_test_reward,
                   "versions": len(result.history) - 1, "rollouts": usage.rollouts, "proposals": usage.proposals,
                   "gate_evals": usage.gate_evals, "wall_time": usage.wall_time, "run_dir": str(target.path)})
        return
    say(result.summary())
    say(f"run directory: {target.path}\nnext: agentgrad status {target.path} · agentgrad report {target.path} · "
        f"agentgrad promote {target.path}")


def execute(target: RunDir, source: ConfigSource, config: CliConfig, mode: Mode) -> None:
    """Run (or resume) in this process; exits 0 when the run ends well, 1 when it failed, 130 when interrupted."""
    from agentgrad.cli.launch import launch

    pid = os.getpid()
    target.write_pid(pid)
    target.note("running", pid=pid, started=time.time())
    try:
        with _graceful_signals(), _progress(mode, target.path) as callbacks:
            result = launch(config, source, target.path, callbacks)
    except AgentgradError as exc:
        target.note("failed", pid=pid, at=time.time(), error=str(exc))
        raise
    except KeyboardInterrupt:
        target.note("interrupted", pid=pid, at=time.time())
        warn(f"interrupted: calls in flight were charged to the budget and the store is consistent.\n"
             f"continue with: agentgrad resume {target.path}")
        raise typer.Exit(INTERRUPTED) from None
    finally:
        target.clear_pid(pid)
    target.note("finished" if result.ok else "failed", pid=pid, at=time.time())
    _summary(result, target, mode)
    raise typer.Exit(OK if result.ok else FAILED)


def _default_dir(config_path: Path) -> Path:
    return Path("runs") / f"{config_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _detach(target: RunDir, mode: Mode) -> None:
    """Start `agentgrad resume RUN_DIR --json` in a new session, its output appended to ``run.log``."""
    command = [sys.executable, "-m", "agentgrad", "resume", str(target.path.resolve()), "--json"]
    with target.log_file.open("ab") as out:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    target.write_pid(child.pid)
    if mode is Mode.JSON:
        emit_json({"event": "detached", "pid": child.pid, "run_dir": str(target.path), "log": str(target.log_file)})
        return
    say(f"started in the background: pid {child.pid}, output in {target.log_file}\n"
        f"watch: agentgrad status {target.path} · stop: agentgrad cancel {target.path}")


@guarded
def run(config: Annotated[Path, typer.Argument(help="A TOML or YAML run configuration.", show_default=False)],
        run_dir: Annotated[Path | None, typer.Option("--run-dir", "-d", help="The run directory (default: "
                                                     "[run] store, else runs/<config>-<time>).")] = None,
        detach: Annotated[bool, typer.Option("--detach", help="Keep running after the terminal closes.")] = False,
        quiet: Quiet = False, as_json: Json = False) -> None:
    """Start a run from a configuration file."""
    mode = _mode(quiet, as_json)
    source, parsed = load_config(config)
    path = run_dir or (Path(parsed.run.store) if parsed.run.store else _default_dir(config))
    target = RunDir(path)
    if target.started():
        fail(f"{path} already holds a run; continue it with: agentgrad resume {path} (or pick another --run-dir)",
             USAGE)
    path.mkdir(parents=True, exist_ok=True)
    target.save_config(source)
    if detach:
        _detach(target, mode)
        return
    execute(target, source, parsed, mode)


def _finished(target: RunDir) -> bool:
    with target.events() as log:
        ends = log.read(["finished", "resumed"])
    return bool(ends) and ends[-1].kind == "finished" and bool(ends[-1].payload.get("ok"))


@guarded
def resume(run_dir: RunDirArg, quiet: Quiet = False, as_json: Json = False) -> None:
    """Continue a stopped run (killed, interrupted or failed) from its run directory."""
    mode = _mode(quiet, as_json)
    target = RunDir(run_dir)
    target.require()
    source = target.config_source()
    if source is None:
        fail(f"{run_dir} was not started by the agentgrad CLI (no stored configuration); resume it from Python "
             "with evolve(..., store=RUN_DIR)")
    pid = target.running_pid()
    if pid is not None and pid != os.getpid():
        fail(f"{run_dir} is being run by process {pid}; stop it first with: agentgrad cancel {run_dir}")
    if _finished(target):
        say(f"{run_dir} is finished: nothing to resume (see agentgrad status {run_dir})")
        return
    execute(target, source, parse_config(source), mode)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@guarded
def cancel(run_dir: RunDirArg,
           timeout: Annotated[float, typer.Option(help="Seconds to wait for the run to stop.")] = 60.0) -> None:
    """Stop a running run cleanly (SIGINT), wait for it, and say how to resume."""
    number(timeout, "--timeout (seconds)", low=0)
    target = RunDir(run_dir)
    target.require()
    pid = target.running_pid()
    if pid is None:
        say(f"{run_dir} is not running; nothing to cancel")
        return
    os.kill(pid, signal.SIGINT)
    if not _wait_gone(pid, timeout):
        fail(f"process {pid} is still stopping after {timeout:.0f} s; check again with agentgrad status {run_dir}")
    target.clear_pid(pid)
    say(f"stopped process {pid}; continue with: agentgrad resume {run_dir}")

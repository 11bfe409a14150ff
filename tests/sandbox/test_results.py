"""A run comes back as data: output, how it ended, what it used. Failures of the code are never raised."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
from typing import Any

import anyio
import pytest

from agentgrad.sandbox import Isolation, LimitHit, Limits, Sandbox, SandboxConfigError, SandboxResult
from agentgrad.sandbox.process import Outcome
from agentgrad.sandbox.verdict import judge
from tests.sandbox.conftest import FAST


def test_a_successful_run(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)\nx = b'x' * (20 << 20)\n")
    assert (result.stdout, result.stderr, result.exit_code, result.signal) == ("out\n", "err\n", 0, None)
    assert result.ok and result.limit_hit is LimitHit.NONE and result.describe() == "exit status 0"
    assert 0 < result.cpu_seconds < FAST.cpu_seconds and 0 < result.wall_seconds < FAST.wall_seconds
    assert result.max_rss_bytes > 20 << 20  # the 20 MiB the code touched
    assert not result.stdout_truncated and not result.stderr_truncated
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.stdout = "changed"  # type: ignore[misc]


def test_a_failing_exit_status_is_data(sandbox: Sandbox) -> None:
    result = sandbox.run_python("raise SystemExit(3)")
    assert result.exit_code == 3 and result.limit_hit is LimitHit.NONE and not result.ok
    assert result.describe() == "exit status 3"
    crashed = sandbox.run_python("raise ValueError('bad')")
    assert crashed.exit_code == 1 and "ValueError: bad" in crashed.stderr


def test_death_by_its_own_signal_is_data(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert result.signal == signal.SIGTERM and result.exit_code is None and result.limit_hit is LimitHit.NONE
    assert result.describe() == "killed by SIGTERM"


def test_stdin_reaches_the_code(sandbox: Sandbox) -> None:
    data = os.urandom(1 << 20)  # more than a pipe holds
    code = "import hashlib, sys\ndata = sys.stdin.buffer.read()\nprint(len(data), hashlib.sha256(data).hexdigest())\n"
    assert sandbox.run_python(code, stdin=data).stdout.split() == [str(len(data)), hashlib.sha256(data).hexdigest()]
    assert sandbox.run("cat", stdin="héllo").stdout == "héllo"
    assert sandbox.run("cat").stdout == ""  # no stdin: end of file at once


def test_code_that_does_not_read_its_stdin_still_ends(sandbox: Sandbox) -> None:
    assert sandbox.run_python("print('ignored it')", stdin=b"x" * (4 << 20)).stdout == "ignored it\n"


def test_argv_runs_without_a_shell_and_strings_through_one(sandbox: Sandbox) -> None:
    assert sandbox.run(["echo", "a  b", "$HOME"]).stdout == "a  b $HOME\n"
    assert sandbox.run("echo one; echo two >&2; exit 4").exit_code == 4


def test_files_are_given_and_importable(sandbox: Sandbox) -> None:
    files = {"helpers/__init__.py": "", "helpers/maths.py": "def double(x):\n    return 2 * x\n"}
    code = "import sys\nfrom helpers.maths import double\nprint(double(int(sys.argv[1])), sys.argv[0])\n"
    assert sandbox.run_python(code, files=files, args=["21"]).stdout == "42 main.py\n"


def test_the_snippet_has_no_future_imports_it_did_not_ask_for(sandbox: Sandbox) -> None:
    code = "def f(x: int) -> None: ...\nprint(type(f.__annotations__['x']).__name__)\n"
    assert sandbox.run_python(code).stdout == "type\n"  # not 'str', as `from __future__ import annotations` gives


@pytest.mark.parametrize("files", [{"/etc/passwd": "x"}, {"../up.txt": "x"}, {"a/../../b": "x"}, {"": "x"},
                                   {"ok.txt": b"bytes"}, {"main.py": "print()"}])
def test_bad_files_are_refused_before_anything_runs(files: dict[str, Any], isolated: Isolation) -> None:
    with pytest.raises(SandboxConfigError):
        Sandbox(FAST).run_python("print()", files=files)


@pytest.mark.parametrize(("command", "kwargs"), [("", {}), ([], {}), (["echo", "nul\0"], {}), ("true", {"stdin": 3})])
def test_bad_commands_are_refused(command: Any, kwargs: dict[str, Any], isolated: Isolation) -> None:
    with pytest.raises(SandboxConfigError):
        Sandbox(FAST).run(command, **kwargs)


def test_runs_in_a_task_group_proceed_side_by_side(sandbox: Sandbox) -> None:
    results: list[SandboxResult] = []

    async def one(index: int) -> None:
        results.append(await sandbox.arun_python(f"import os, time\ntime.sleep(0.3)\nprint({index}, os.getcwd())"))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(one, index)
        results.append(await sandbox.arun(["echo", "async"]))

    anyio.run(main)
    assert all(result.ok for result in results) and results[-1].stdout == "async\n"
    lines = sorted(result.stdout.split()[0] for result in results[:3])
    assert lines == ["0", "1", "2"] and len({result.stdout.split()[1] for result in results[:3]}) == 3


def _outcome(**changes: Any) -> Outcome:
    base = Outcome(stdout=b"", stderr=b"", stdout_truncated=False, stderr_truncated=False, stopped=None,
                   killed=False, status=0, cpu_seconds=0.1, max_rss_bytes=1, wall_seconds=0.1, note=None)
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(("changes", "expected"), [
    ({}, LimitHit.NONE),
    ({"status": signal.SIGKILL, "cpu_seconds": 1.0}, LimitHit.CPU),  # the hard limit
    ({"status": signal.SIGKILL, "cpu_seconds": 0.2}, LimitHit.NONE),  # somebody else's SIGKILL
    ({"status": signal.SIGXFSZ}, LimitHit.FILE_SIZE),
    ({"status": 1 << 8, "note": "memory"}, LimitHit.MEMORY),
    ({"status": 0, "note": "memory"}, LimitHit.NONE),  # the code caught it and went on
    ({"stopped": LimitHit.WALL_CLOCK, "killed": True, "status": signal.SIGKILL}, LimitHit.WALL_CLOCK),
    ({"stopped": LimitHit.WALL_CLOCK, "killed": False, "status": 0}, LimitHit.NONE),  # it finished just in time
    ({"stopped": LimitHit.WALL_CLOCK, "status": None}, LimitHit.WALL_CLOCK),  # torn down without a report
    ({"stdout_truncated": True, "status": 0}, LimitHit.OUTPUT),
])
def test_the_limit_hit_is_read_off_the_outcome(changes: dict[str, Any], expected: LimitHit) -> None:
    assert judge(_outcome(**changes), Limits(cpu_seconds=1)).limit_hit is expected

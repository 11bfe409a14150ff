"""Sandboxed code is stopped at each of its limits, and the result says which one."""

from __future__ import annotations

import dataclasses
import signal
import textwrap

from agentgrad.sandbox import LimitHit, Sandbox
from tests.sandbox.conftest import FAST


def test_a_cpu_loop_is_killed_at_the_cpu_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("while True:\n    pass\n")
    assert result.limit_hit is LimitHit.CPU
    assert result.signal == signal.SIGXCPU and result.exit_code is None and not result.ok
    assert FAST.cpu_seconds * 0.9 <= result.cpu_seconds < FAST.cpu_seconds + 1
    assert result.wall_seconds < FAST.wall_seconds


def test_code_that_ignores_sigxcpu_is_killed_at_the_hard_cpu_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python(
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n")
    assert result.limit_hit is LimitHit.CPU
    assert result.signal == signal.SIGKILL and result.cpu_seconds >= FAST.cpu_seconds


def test_a_big_allocation_fails_at_the_memory_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("block = bytearray(1 << 30)\nprint('allocated')\n")
    assert result.limit_hit is LimitHit.MEMORY
    assert result.exit_code == 1 and "MemoryError" in result.stderr and "allocated" not in result.stdout
    assert result.max_rss_bytes < FAST.memory_bytes


def test_a_big_file_stops_at_the_file_size_limit(sandbox: Sandbox) -> None:
    code = """
        import os
        with open("big", "wb") as file:
            try:
                file.write(b"x" * (2 * FAST_FILE))
            finally:
                print(os.path.getsize("big"), flush=True)
    """
    result = sandbox.run_python(textwrap.dedent(code).replace("FAST_FILE", str(FAST.file_bytes)))
    assert result.limit_hit is LimitHit.FILE_SIZE
    assert result.exit_code == 1 and "File too large" in result.stderr
    assert int(result.stdout) <= FAST.file_bytes


def test_a_program_that_writes_a_big_file_is_killed_by_sigxfsz(sandbox: Sandbox) -> None:
    result = sandbox.run(f"exec head -c {2 * FAST.file_bytes} /dev/zero > big")
    assert result.limit_hit is LimitHit.FILE_SIZE and result.signal == signal.SIGXFSZ


def test_a_fork_bomb_is_bounded_by_the_process_limit(sandbox: Sandbox) -> None:
    code = """
        import os, time
        for count in range(1, 100):
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            print(count, flush=True)
    """
    result = sandbox.run_python(textwrap.dedent(code))
    assert result.limit_hit is LimitHit.PROCESSES
    assert "BlockingIOError" in result.stderr
    assert max(int(line) for line in result.stdout.split()) == FAST.processes - 1  # the code and its children
    assert result.wall_seconds < 5.0  # the sleeping children died with the run


def test_threads_count_against_the_process_limit(sandbox: Sandbox) -> None:
    code = ("import threading, time\nfor _ in range(100):\n"
            "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n")
    result = sandbox.run_python(code)
    assert result.limit_hit is LimitHit.PROCESSES and "can't start new thread" in result.stderr


def test_a_sleeper_is_killed_at_the_wall_clock(isolated: object) -> None:
    limits = dataclasses.replace(FAST, wall_seconds=1.0)
    result = Sandbox(limits).run_python("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    assert result.limit_hit is LimitHit.WALL_CLOCK
    assert result.signal == signal.SIGKILL and result.stdout == "started\n"
    assert 1.0 <= result.wall_seconds < 3.0


def test_huge_output_is_truncated_at_the_output_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert result.limit_hit is LimitHit.OUTPUT
    assert result.stdout_truncated and not result.stderr_truncated
    assert result.stdout == "x" * FAST.output_bytes


def test_stderr_is_bounded_too(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys\nprint('fine', flush=True)\nsys.stderr.write('e' * 10_000_000)\n")
    assert result.limit_hit is LimitHit.OUTPUT and result.stderr_truncated and not result.stdout_truncated
    assert len(result.stderr) == FAST.output_bytes and result.stdout == "fine\n"


def test_processes_the_code_leaves_behind_die_with_the_run(sandbox: Sandbox) -> None:
    # A detached sleeper that keeps stdout open would hold the run until the wall clock if it survived.
    code = "import subprocess\nsubprocess.Popen(['setsid', 'sleep', '60'])\nprint('left it')\n"
    result = sandbox.run_python(code)
    assert result.ok and result.stdout == "left it\n" and result.limit_hit is LimitHit.NONE
    assert result.wall_seconds < 10.0  # far short of the sleeper's 60 s

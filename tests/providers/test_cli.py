"""Tests of `CommandAgent`: answers on stdout, failures with stderr, and a hung command killed with its group."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentgrad.errors import ConfigError
from agentgrad.providers import CommandAgent, CommandFailed, Completion, Message, ProviderTimeout, Usage
from agentgrad.providers.cli import render_prompt
from tests.providers.helpers import USER

PY = sys.executable


def run(agent: CommandAgent, messages: tuple[Message, ...] = USER, **params: Any) -> Completion:
    return asyncio.run(agent.complete(messages, **params))


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_soon(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.01)
    return False


def hanging_script(pid_file: Path, ignore_term: bool) -> str:
    """A command that starts a grandchild, writes its pid, and hangs (optionally ignoring SIGTERM)."""
    return textwrap.dedent(f"""
        import signal, subprocess, sys, time
        if {ignore_term}:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open({str(pid_file)!r}, "w") as f:
            f.write(str(child.pid))
        time.sleep(60)
    """)


def test_the_prompt_goes_on_stdin_and_stdout_is_the_answer() -> None:
    agent = CommandAgent([PY, "-c", "import sys; print(sys.stdin.read().upper())"], timeout=10)
    result = run(agent)
    assert result.text == "HELLO BRAVE NEW WORLD\n"
    assert (result.usage, result.finish_reason) == (Usage(), "stop")


def test_a_placeholder_puts_the_prompt_in_argv() -> None:
    agent = CommandAgent([PY, "-c", "import sys; print(sys.argv[1][::-1])", "{prompt}"], timeout=10)
    assert run(agent).text == "dlrow wen evarb olleh\n"


def test_a_parse_function_can_report_usage() -> None:
    def parse(out: str) -> Completion:
        return Completion(out.strip(), Usage(7, 3), 0.0, "agent-model", "done")

    result = run(CommandAgent([PY, "-c", "print('ok')"], timeout=10, parse=parse))
    assert (result.text, result.usage, result.model) == ("ok", Usage(7, 3), "agent-model")


def test_a_non_zero_exit_is_command_failed_with_stderr() -> None:
    agent = CommandAgent([PY, "-c", "import sys; sys.stderr.write('quota exceeded'); sys.exit(3)"], timeout=10)
    with pytest.raises(CommandFailed) as info:
        run(agent)
    assert info.value.status == 3 and "quota exceeded" in str(info.value)
    assert not info.value.transient


@pytest.mark.parametrize("ignore_term", [False, True])
def test_a_hung_command_is_killed_with_its_whole_process_group(tmp_path: Path, ignore_term: bool) -> None:
    pid_file = tmp_path / "grandchild.pid"
    agent = CommandAgent([PY, "-c", hanging_script(pid_file, ignore_term)], timeout=0.5, grace=0.2)
    start = time.monotonic()
    with pytest.raises(ProviderTimeout):
        run(agent)
    assert time.monotonic() - start < 3.0
    assert agent.last_pid is not None and not alive(agent.last_pid)
    assert gone_soon(int(pid_file.read_text()))


def test_a_call_cancelled_while_its_process_starts_still_kills_the_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    agent = CommandAgent([PY, "-c", hanging_script(pid_file, False)], timeout=30, grace=0.2)

    async def cancel_at_once() -> None:
        task = asyncio.create_task(agent.complete(USER))
        await asyncio.sleep(0)  # the call is inside the spawn, waiting for the pipes
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_at_once())
    assert agent.last_pid is not None and not alive(agent.last_pid)
    if pid_file.exists() and pid_file.read_text():
        assert gone_soon(int(pid_file.read_text()))


def test_a_cancelled_call_leaves_no_process_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    agent = CommandAgent([PY, "-c", hanging_script(pid_file, False)], timeout=30, grace=0.2)

    async def cancel_midway() -> None:
        task = asyncio.create_task(agent.complete(USER))
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert agent.last_pid is not None and not alive(agent.last_pid)
    assert gone_soon(int(pid_file.read_text()))


def test_the_command_runs_in_its_own_session() -> None:
    agent = CommandAgent([PY, "-c", "import os; print(os.getsid(0))"], timeout=10)
    assert int(run(agent).text) != os.getsid(0)


def test_many_turns_render_under_role_headers() -> None:
    text = render_prompt((Message("system", "rules"), Message("user", "task")))
    assert text == "[system]\nrules\n\n[user]\ntask"


@pytest.mark.parametrize(("argv", "timeout"), [([], 1.0), (["x"], 0.0)])
def test_bad_settings_are_refused(argv: list[str], timeout: float) -> None:
    with pytest.raises(ConfigError):
        CommandAgent(argv, timeout=timeout)

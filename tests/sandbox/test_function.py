"""`SandboxedFunction`: an evolved module's `run(task_input) -> str`, called in the sandbox, answers as JSON."""

from __future__ import annotations

import anyio
import pytest

from agentgrad.sandbox import FunctionCall, LimitHit, Sandbox, SandboxConfigError, SandboxedFunction

EVOLVED = '''
import helper

def run(task_input: str) -> str:
    print("thinking out loud")  # goes to stderr, never into the answer
    return helper.shout(task_input)
'''


def test_the_function_is_called_on_the_input(sandbox: Sandbox) -> None:
    function = SandboxedFunction(EVOLVED, sandbox, files={"helper.py": "def shout(x):\n    return x.upper()\n"})
    call = function("héllo {json} \"quotes\"\n")
    assert call.ok and call.output == "HÉLLO {JSON} \"QUOTES\"\n" and call.error is None
    assert "thinking out loud" in call.result.stderr and call.result.limit_hit is LimitHit.NONE


@pytest.mark.parametrize(("source", "message"), [
    ("def run(task_input):\n    return 42\n", "returned int, not str"),
    ("def run(task_input):\n    raise KeyError('missing')\n", "KeyError: 'missing'"),
    ("def other(task_input):\n    return ''\n", "has no attribute 'run'"),
    ("def run(task_input:\n", "SyntaxError"),
])
def test_a_broken_function_is_an_error_not_an_exception(sandbox: Sandbox, source: str, message: str) -> None:
    call = SandboxedFunction(source, sandbox)("input")
    assert not call.ok and call.output is None and call.error is not None
    assert message in call.error and call.error.startswith("exit status 1")


def test_a_function_that_spins_is_stopped_at_the_cpu_limit(sandbox: Sandbox) -> None:
    call = SandboxedFunction("def run(task_input):\n    while True:\n        pass\n", sandbox)("x")
    assert not call.ok and call.result.limit_hit is LimitHit.CPU and "cpu limit" in (call.error or "")


def test_a_function_that_writes_to_descriptor_1_spoils_its_answer(sandbox: Sandbox) -> None:
    source = "import os\ndef run(task_input):\n    os.write(1, b'noise')\n    return 'answer'\n"
    call = SandboxedFunction(source, sandbox)("x")
    assert not call.ok and "not the harness's JSON answer" in (call.error or "")


def test_calls_can_be_awaited_side_by_side(sandbox: Sandbox) -> None:
    function = SandboxedFunction("def run(task_input):\n    return task_input[::-1]\n", sandbox, entry="run")
    calls: dict[str, FunctionCall] = {}

    async def one(text: str) -> None:
        calls[text] = await function.acall(text)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for text in ("abc", "xyz"):
                group.start_soon(one, text)

    anyio.run(main)
    assert {text: call.output for text, call in calls.items()} == {"abc": "cba", "xyz": "zyx"}


@pytest.mark.parametrize("kwargs", [{"entry": "not a name"}, {"files": {"evolved.py": ""}}])
def test_a_bad_function_setup_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(SandboxConfigError):
        SandboxedFunction("def run(x):\n    return x\n", Sandbox(), **kwargs)  # type: ignore[arg-type]

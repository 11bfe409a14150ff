"""Sandboxed code gets an environment built from nothing: no key or token of the parent reaches it."""

from __future__ import annotations

import json

import pytest

from agentgrad.sandbox import Isolation, Sandbox, SandboxConfigError
from agentgrad.sandbox.environment import looks_secret
from tests.sandbox.conftest import FAST

SECRETS = {"OPENAI_API_KEY": "sk-test-4c1d0b9e", "ANTHROPIC_API_KEY": "sk-ant-test-77e2",
           "GITHUB_TOKEN": "ghp_test_51a", "MY_SERVICE_SECRET": "s3cr3t-value-9f",
           "PLAIN_SETTING": "not-a-secret-but-not-passed-either"}

LOOK_EVERYWHERE = """
import json, os
seen = []
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as file:
                seen.append(file.read().decode(errors="replace"))
        except OSError:
            pass
print(json.dumps({"env": dict(os.environ), "proc": seen}))
"""


def test_the_code_cannot_read_keys_set_in_the_parent(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    result = sandbox.run_python(LOOK_EVERYWHERE)
    assert result.ok, result.stderr
    seen = json.loads(result.stdout)
    assert not set(SECRETS) & set(seen["env"])
    assert seen["proc"], "the code should at least see its own /proc entries"
    for value in SECRETS.values():
        assert value not in result.stdout and value not in result.stderr


def test_the_environment_is_the_allow_list(sandbox: Sandbox, isolated: Isolation) -> None:
    env = json.loads(sandbox.run_python("import json, os\nprint(json.dumps(dict(os.environ)))").stdout)
    assert set(env) == {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PWD"}
    assert env["HOME"] == env["TMPDIR"] == env["PWD"]


def test_extra_variables_are_passed_when_they_do_not_look_secret(isolated: Isolation) -> None:
    result = Sandbox(FAST, env={"TASK_MODE": "eval"}).run("echo $TASK_MODE")
    assert result.stdout == "eval\n"


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "GITHUB_TOKEN", "db_password", "MY_SECRET",
                                  "AWS_REGION", "HF_HOME", "SESSION_COOKIE"])
def test_extra_variables_that_look_secret_are_refused(name: str) -> None:
    assert looks_secret(name)
    with pytest.raises(SandboxConfigError, match=name):
        Sandbox(FAST, env={name: "x"})


@pytest.mark.parametrize("env", [{"BAD NAME": "x"}, {"": "x"}, {"OK": "nul\0byte"}, {"OK": 3}])
def test_malformed_extra_variables_are_refused(env: dict[str, object]) -> None:
    with pytest.raises(SandboxConfigError):
        Sandbox(FAST, env=env)  # type: ignore[arg-type]

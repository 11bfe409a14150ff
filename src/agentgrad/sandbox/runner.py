"""`Sandbox`: run a command or a Python snippet isolated from the host, within limits, and get the run back as a
`SandboxResult`."""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio.to_thread

from agentgrad.sandbox.environment import check_extra, clean_environment
from agentgrad.sandbox.errors import SandboxConfigError
from agentgrad.sandbox.isolation import Isolation, fresh_uid, probe_isolation
from agentgrad.sandbox.limits import Limits
from agentgrad.sandbox.mounts import plan_mounts
from agentgrad.sandbox.process import Launch, launch
from agentgrad.sandbox.result import SandboxResult
from agentgrad.sandbox.verdict import judge
from agentgrad.sandbox.workdir import check_files, working_directory

MAIN = "main.py"  # where `run_python` puts the snippet, in the working directory
NOTE_FD = 3  # where the Python bootstrap notes the limit it saw
_BOOTSTRAP = Path(__file__).with_name("_bootstrap.py")
_HELPERS_AS_CODE_USER = 2  # in a user namespace, `unshare` and the launcher count as the code's own processes


class Sandbox:
    """Runs code that nobody reviewed (evolved harnesses, programs an agent wrote) isolated from the host.

    Each run gets a fresh working directory (its HOME and TMPDIR, removed afterwards), an environment built from
    nothing, new mount, PID, IPC, UTS and network namespaces, a read-only view of every other file, its own
    unprivileged user (as root), and the resource limits of `limits`. Where the namespaces cannot be made, runs
    are refused with a typed error instead of being run unisolated.

    Args:
        limits: what each run may use.
        network: False (the default) marks the code network-sensitive: it runs in its own network namespace and
            is refused (`NetworkIsolationError`) where none can be made. True lets it share the host's network.
        env: extra environment variables; names that look like credentials are refused.
        unshare: the util-linux `unshare` binary (default: the one on PATH).
    """

    def __init__(self, limits: Limits | None = None, *, network: bool = False, env: Mapping[str, str] | None = None,
                 unshare: str | None = None) -> None:
        if limits is not None and not isinstance(limits, Limits):
            raise SandboxConfigError(f"limits must be a Limits, not {type(limits).__name__}")
        self.limits = limits or Limits()
        self.network = bool(network)
        self._env = check_extra(env or {})
        self._unshare = unshare
        self._isolation: Isolation | None = None
        self._bootstrap = _BOOTSTRAP.read_text(encoding="utf-8")
        self._readable = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable)

    @property
    def isolation(self) -> Isolation:
        """What this machine can isolate (probed on first use)."""
        if self._isolation is None:
            self._isolation = probe_isolation(self._unshare)
        return self._isolation

    def run(self, command: str | Sequence[str], *, stdin: str | bytes | None = None,
            files: Mapping[str, str] | None = None) -> SandboxResult:
        """Run a shell command (`str`, through `/bin/sh -c`) or an argv in the sandbox.

        Args:
            command: the command line, or the program and its arguments (found on the sandbox's PATH).
            stdin: what the code reads on stdin (text is UTF-8 encoded); None: end of file at once.
            files: relative path -> text, written into the working directory before the run.
        """
        return self._run(_argv(command), stdin, files, python=False)

    def run_python(self, code: str, *, stdin: str | bytes | None = None, files: Mapping[str, str] | None = None,
                   args: Sequence[str] = ()) -> SandboxResult:
        """Run a Python snippet as `__main__` with this interpreter in isolated mode (`-I`), as `main.py` in the
        working directory (which is on `sys.path`, so `files` can hold modules it imports).

        Args:
            code: the source.
            stdin, files: as in `run` (`files` may not hold `main.py`).
            args: `sys.argv[1:]` of the snippet.
        """
        if not isinstance(code, str):
            raise SandboxConfigError(f"code must be Python source text, not {type(code).__name__}")
        if isinstance(args, str):
            raise SandboxConfigError("args must be a sequence of arguments, not one string")
        if files is not None and MAIN in files:
            raise SandboxConfigError(f"files may not hold {MAIN}: run_python writes the snippet there")
        argv = (sys.executable, "-I", "-B", "-c", self._bootstrap, str(NOTE_FD), MAIN, *_argv(list(args), empty=True))
        return self._run(argv, stdin, {**(files or {}), MAIN: code}, python=True)

    async def arun(self, command: str | Sequence[str], *, stdin: str | bytes | None = None,
                   files: Mapping[str, str] | None = None) -> SandboxResult:
        """`run` in a worker thread: the event loop keeps going while the code runs."""
        return await anyio.to_thread.run_sync(functools.partial(self.run, command, stdin=stdin, files=files))

    async def arun_python(self, code: str, *, stdin: str | bytes | None = None,
                          files: Mapping[str, str] | None = None, args: Sequence[str] = ()) -> SandboxResult:
        """`run_python` in a worker thread."""
        call = functools.partial(self.run_python, code, stdin=stdin, files=files, args=args)
        return await anyio.to_thread.run_sync(call)

    def _run(self, argv: tuple[str, ...], stdin: str | bytes | None, files: Mapping[str, str] | None, *,
             python: bool) -> SandboxResult:
        isolation = self.isolation
        unshare = isolation.require(network=self.network)
        checked = check_files(files or {})
        data = _stdin(stdin)
        uid = fresh_uid() if isolation.drops_user else None
        with working_directory(checked, uid) as workdir:
            spec = Launch(
                unshare=unshare, flags=isolation.unshare_flags(network=self.network), argv=argv,
                env=clean_environment(workdir, sys.executable, self._env), cwd=workdir, uid=uid,
                plan=plan_mounts(workdir, self._readable, as_stranger=uid is not None, own_network=not self.network),
                limits=self.limits,
                extra_processes=0 if uid is not None else _HELPERS_AS_CODE_USER,
                note_fd=NOTE_FD if python else None, stdin=data)
            outcome = launch(spec)
        return judge(outcome, self.limits)


def _argv(command: str | Sequence[str], *, empty: bool = False) -> tuple[str, ...]:
    """The argv of a command: a string runs through the shell; a sequence must hold text without NUL bytes."""
    if isinstance(command, str):
        if not command.strip():
            raise SandboxConfigError("the command is empty")
        return ("/bin/sh", "-c", command)
    argv = tuple(command)
    if not argv and not empty:
        raise SandboxConfigError("the command is empty")
    for item in argv:
        if not isinstance(item, str) or "\0" in item:
            raise SandboxConfigError(f"argv items must be text without NUL bytes, not {item!r}")
    return argv


def _stdin(stdin: str | bytes | None) -> bytes | None:
    if stdin is None or isinstance(stdin, bytes):
        return stdin
    if isinstance(stdin, str):
        return stdin.encode("utf-8")
    raise SandboxConfigError(f"stdin must be text or bytes, not {type(stdin).__name__}")

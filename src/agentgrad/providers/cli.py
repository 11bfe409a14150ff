"""`CommandAgent`: a command-line coding agent as a provider (prompt in on stdin or argv, text out on stdout).

The command runs in its own process group. At the timeout (or if the call is cancelled) the whole group gets
SIGTERM, then SIGKILL after a grace period, so no grandchild outlives the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentgrad.errors import ConfigError
from agentgrad.providers.base import Completion, Message, Usage, clean_text
from agentgrad.providers.errors import CommandFailed, ProviderTimeout, excerpt

PLACEHOLDER = "{prompt}"
Parse = Callable[[str], "str | Completion"]


def render_prompt(messages: Sequence[Message]) -> str:
    """One text for a command: a lone user message as is; otherwise each turn under a `[role]` header."""
    if len(messages) == 1 and messages[0].role == "user":
        return messages[0].content
    return "\n\n".join(f"[{m.role}]\n{m.content}" for m in messages)


class CommandAgent:
    """Runs `argv` once per call.

    Args:
        argv: the command; an item containing "{prompt}" gets the prompt there, else the prompt goes on stdin.
        timeout: default seconds a call may take (a call may pass `timeout=...`).
        cwd: working directory (None: ours).
        env: the full environment of the command (None: ours).
        grace: seconds between SIGTERM and SIGKILL.
        parse: turns stdout into the answer text or a `Completion` (e.g. to read a JSON report with token
            counts); default: stdout as is.
        name: the provider's name; default "cli:{argv[0]}".
    State: none between calls.

    >>> agent = CommandAgent(["my-agent", "--print", "{prompt}"], timeout=600)
    """

    def __init__(self, argv: Sequence[str], *, timeout: float, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None, grace: float = 2.0, parse: Parse | None = None,
                 name: str | None = None) -> None:
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"CommandAgent argv must be a non-empty list of strings, got {argv!r}")
        if timeout <= 0 or grace < 0:
            raise ConfigError(f"CommandAgent needs timeout > 0 and grace >= 0, got {timeout!r}, {grace!r}")
        self.argv = tuple(argv)
        self.timeout = float(timeout)
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.grace = float(grace)
        self.parse = parse
        self.name = name or f"cli:{os.path.basename(argv[0])}"
        self.last_pid: int | None = None

    async def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Run the command on the rendered prompt; raises `ProviderTimeout` or `CommandFailed`."""
        prompt = render_prompt(messages)
        timeout = float(params.get("timeout") or self.timeout)
        inline = any(PLACEHOLDER in a for a in self.argv)
        argv = [a.replace(PLACEHOLDER, prompt) for a in self.argv] if inline else list(self.argv)
        start = time.perf_counter()
        proc = await self._spawn(argv, inline)
        try:
            out, err = await asyncio.wait_for(proc.communicate(None if inline else prompt.encode()), timeout)
        except asyncio.TimeoutError:
            await self._kill_group(proc)
            raise ProviderTimeout(f"killed after {timeout:g}s", provider=self.name, path=self.argv[0]) from None
        finally:
            if proc.returncode is None:  # cancelled: leave no process behind
                await self._kill_group(proc)
        if proc.returncode != 0:
            raise CommandFailed(f"exited with {proc.returncode}", provider=self.name, path=self.argv[0],
                                status=proc.returncode, excerpt=excerpt(err))
        return self._completion(out.decode("utf-8", "replace"), str(params.get("model") or self.name),
                                time.perf_counter() - start)

    async def _spawn(self, argv: Sequence[str], inline: bool) -> asyncio.subprocess.Process:
        """Start the command in a process group of its own. A call cancelled while the process starts still waits
        for it to exist and kills its group, so no process (or grandchild) outlives the call."""
        starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL if inline else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=self.cwd, env=self.env,
            start_new_session=True))
        try:
            proc = await asyncio.shield(starting)
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):  # it could not start: nothing to clean up, the cancel stands
                started = await starting
                self.last_pid = started.pid
                await self._kill_group(started)
            raise
        self.last_pid = proc.pid
        return proc

    def _completion(self, stdout: str, model: str, latency: float) -> Completion:
        parsed = self.parse(stdout) if self.parse is not None else stdout
        if isinstance(parsed, Completion):
            return Completion(clean_text(parsed.text), parsed.usage, latency, parsed.model, parsed.finish_reason)
        if not isinstance(parsed, str):
            raise ConfigError(f"{self.name}: parse must return str or Completion, got {type(parsed).__name__}")
        return Completion(clean_text(parsed), Usage(), latency, model, "stop")

    async def _kill_group(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, wait up to `grace` for the leader, then SIGKILL the group and reap."""
        _signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(asyncio.TimeoutError):  # still running after the grace: SIGKILL below
            await asyncio.wait_for(proc.wait(), self.grace)
        _signal_group(proc.pid, signal.SIGKILL)  # grandchildren may have ignored SIGTERM
        await proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return  # the whole group is already gone

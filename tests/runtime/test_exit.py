"""Exits that happen: a run whose synchronous `run` hangs for good returns, and the process then exits."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

_HANGS = textwrap.dedent("""
    import sys, threading
    from agentgrad.runtime.budget import Budget
    from agentgrad.runtime.config import RunConfig
    from tests.runtime.helpers import agent, run

    bot = agent()
    never = threading.Event()

    def hangs(rendered, task):
        if task.id.endswith("3"):
            never.wait()  # a stuck request that never returns
        return bot.run_sync(rendered, task) if hasattr(bot, "run_sync") else "no answer"

    result = run(__import__("pathlib").Path(sys.argv[1]), bot, run=hangs, asynchronous=sys.argv[2] == "async",
                 budget=Budget(rollouts=12, proposals=4, gate_evals=40), config=RunConfig(timeout=0.5))
    print("returned", result.ok, flush=True)
""")


def test_a_run_whose_sync_function_hangs_returns_and_the_process_exits(tmp_path: Path) -> None:
    for mode in ("sync", "async"):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", _HANGS, str(tmp_path / mode), mode], capture_output=True,
                              text=True, timeout=120, cwd=Path(__file__).parents[2])
        assert done.returncode == 0, done.stderr[-2000:]
        assert "returned" in done.stdout
        assert time.monotonic() - started < 60  # the hung threads did not hold the interpreter at exit

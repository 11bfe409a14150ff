"""Start a CLI run (as `agentgrad run` does) and SIGKILL this process right after its N-th event of a kind.

Usage: ``python killed_run.py CONFIG RUN_DIR KIND:N``. The run directory then holds exactly what a killed
`agentgrad run` leaves: the stored configuration, the store and the event log up to that point.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgrad.cli.config import load_config
from agentgrad.cli.launch import launch
from agentgrad.cli.rundir import RunDir


def main(argv: list[str]) -> int:
    config_path, run_dir, spec = Path(argv[0]), Path(argv[1]), argv[2]
    kind, count = spec.split(":")
    seen = {"n": 0}

    def die(event: str, payload: Mapping[str, Any]) -> None:
        if event == kind:
            seen["n"] += 1
            if seen["n"] == int(count):
                os.kill(os.getpid(), signal.SIGKILL)

    source, config = load_config(config_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    RunDir(run_dir).save_config(source)
    result = launch(config, source, run_dir, [die])
    print(f"not killed: the run ended first (ok={result.ok})", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Every published method on the embedded local model: each recipe's example, synchronous and asynchronous.

`benchmarks/algorithms.py` compares the methods' loops with a scripted reflector and a stand-in solver (fast, in
CI); this script runs the same recipes with a real model: each method's example in ``examples/algorithms/``
(llama.cpp in the example's process, Qwen2.5-Coder-0.5B-Instruct, about a minute to load), on the example's own
shipped set, at ``--calls`` solver calls and at most ``--seconds`` of wall time (the examples that take a wall-time
budget get it as ``--seconds``; the others are stopped by the subprocess timeout, and the row says so). Each run is
a fresh process with its own run directory, one after the other (the model takes the machine's cores).

For each run: held-out reward before and after (the test split, scored after the run by no decision), the gain,
versions committed, rollouts, proposals, gate evaluations, the loop's and the process's wall time, and whether the
run was ok (a failed run's error is kept). Writes ``benchmarks/out/algorithms_local.json`` and a PNG. Needs
``pip install 'agentgrad[local]'``; CPU timings are noisy when other processes share the machine.

    python benchmarks/algorithms_local.py [--methods gepa,opro] [--runtimes sync,async] [--calls 40]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "algorithms"
OUT = Path(__file__).parent / "out"
METHODS = ("gepa", "ace", "opro", "reflexion", "evoskill", "skillopt", "skillneo", "meta_harness", "adas", "dgm")
LOAD_SECONDS = 180.0  # the subprocess gets this much beyond --seconds (loading the model, held-out scoring)

HELD_OUT = re.compile(r"held-out reward \(.*\): ([0-9.]+) -> ([0-9.]+)")
VERSIONS = re.compile(r"versions: (\d+) (?:committed|library commits)")
USAGE = re.compile(r"usage: (\d+) rollouts, (\d+) proposals, (\d+) gate evals .*?, ([0-9.]+) s")


def command(method: str, runtime: str, calls: int, seconds: float, run_dir: Path) -> list[str]:
    """The example's command line for one run."""
    line = [sys.executable, str(EXAMPLES / f"{method}_local.py"), "--calls", str(calls), "--seconds", str(seconds),
            "--run-dir", str(run_dir)]
    return line + (["--async"] if runtime == "async" else [])


def parse(stdout: str) -> dict[str, Any]:
    """The figures of an example's printed summary (`Result.summary`); None where a line is missing."""
    held, versions, usage = HELD_OUT.search(stdout), VERSIONS.search(stdout), USAGE.search(stdout)
    baseline, learned = (float(held.group(1)), float(held.group(2))) if held else (None, None)
    figures: dict[str, Any] = {"ok": "run ok" in stdout, "baseline": baseline, "learned": learned,
                               "gain": None if learned is None or baseline is None else learned - baseline,
                               "commits": int(versions.group(1)) if versions else None}
    names = ("rollouts", "proposals", "gate_evals", "loop_seconds")
    figures.update({n: (float(usage.group(i + 1)) if usage else None) for i, n in enumerate(names)})
    failed = re.search(r"run FAILED: (.*)", stdout)
    figures["error"] = failed.group(1)[:400] if failed else None
    return figures


def one_run(method: str, runtime: str, calls: int, seconds: float) -> dict[str, Any]:
    """One example, one runtime: run it in its own process and read its summary."""
    with tempfile.TemporaryDirectory() as tmp:
        line = command(method, runtime, calls, seconds, Path(tmp) / "run")
        started = time.perf_counter()
        try:
            done = subprocess.run(line, capture_output=True, text=True, check=False, cwd=ROOT,
                                  timeout=seconds + LOAD_SECONDS)
            stdout, code, timed_out = done.stdout, done.returncode, False
        except subprocess.TimeoutExpired as expired:
            raw = expired.stdout or b""
            stdout, code, timed_out = raw.decode() if isinstance(raw, bytes) else raw, None, True
        wall = time.perf_counter() - started
    row = {"method": method, "runtime": runtime, "calls_budget": calls, "exit_code": code, "timed_out": timed_out,
           "wall_seconds": wall, **parse(stdout)}
    if row["error"] is None and (timed_out or code not in (0, 1)):
        row["error"] = "stopped by the subprocess timeout" if timed_out else f"exit code {code}"
    return row


def plot(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Held-out gain per method, sync beside async (a failed run shows no bar)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["method"] for r in rows))
    fig, ax = plt.subplots(figsize=(10, 4))
    for offset, runtime in ((-0.2, "sync"), (0.2, "async")):
        gains = {r["method"]: r["gain"] or 0.0 for r in rows if r["runtime"] == runtime}
        ax.bar([i + offset for i in range(len(names))], [gains.get(n, 0.0) for n in names], width=0.4,
               label=runtime)
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_title("held-out gain on the local model")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated method names")
    parser.add_argument("--runtimes", default="sync,async", help="sync, async or both")
    parser.add_argument("--calls", type=int, default=40, help="the call budget of each run")
    parser.add_argument("--seconds", type=float, default=420.0, help="the wall-time budget of each run")
    parser.add_argument("--out", type=Path, default=OUT / "algorithms_local.json")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    rows = []
    for method in args.methods.split(","):
        for runtime in args.runtimes.split(","):
            row = one_run(method, runtime, args.calls, args.seconds)
            rows.append(row)
            print(json.dumps(row), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)  # written after every run: a long run keeps its rows
            args.out.write_text(json.dumps({"calls": args.calls, "seconds": args.seconds, "runs": rows}, indent=1))
    plot(rows, args.out.with_suffix(".png"))
    for r in rows:
        gain = "-" if r["gain"] is None else f"{r['gain']:+.2f}"
        print(f"{r['method']:12s} {r['runtime']:5s} {'ok' if r['ok'] else 'FAILED':6s} gain {gain} "
              f"({r['baseline']} -> {r['learned']}) commits {r['commits']} proposals {r['proposals']} "
              f"wall {r['wall_seconds']:.0f}s" + (f"  [{r['error']}]" if r["error"] else ""))


if __name__ == "__main__":
    main()

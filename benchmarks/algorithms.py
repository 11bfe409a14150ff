"""Every published method on the engine, on one shipped task set at one call budget, synchronous and asynchronous.

Each method runs as its recipe (`agentgrad.algorithms`) on the shipped ``routing`` set with the offline stand-in
for a model (`agentgrad.testing.routing_standin`) and the scripted reflector its tests use, both given a seeded
latency (the solver ~20 ms a call, the reflector ~80 ms), so that the runtimes differ as they would with a model.
``--sync`` is the method's own loop as published (rounds with a barrier); ``--async`` is the same method on the
barrier-free runtime (the FlashEvolve design). For each run: held-out gain, calls, proposals, tokens, wall time,
proposals per second, and the time to a target held-out reward (each committed version is scored on the test
split afterwards with the same solver, free of charge). Writes ``benchmarks/out/algorithms.json`` and a PNG.

With ``gepa`` among the methods, GEPA's own published loop runs too (runtime ``published``, the ``gepa_published``
row; gepa_published.py): the ``gepa`` package's `gepa.optimize` on the same splits of each seed, from the same
text, with the same solver and scripted reflector behind the same latencies, ``max_metric_calls`` = ``--calls``
and ``WORKERS`` solver calls in flight; its best candidate is scored on the test split and each candidate it
accepted is timed the way the recipe's commits are. gepa is not installed in the main environment: that row then
runs in ``--gepa-python`` (``.venv-gepa``, made by ``make bench-gepa``), or is skipped with a note if there is
none. ``--no-published`` leaves it out.

    python benchmarks/algorithms.py [--methods gepa,ace] [--calls 200] [--seeds 0,1] [--target 0.6]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted reflectors live beside the tests

from agentgrad.core.library import is_packed, unpack
from agentgrad.data.splits import split
from agentgrad.data.task import Task
from agentgrad.providers.base import Completion, Message, Usage
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.result import Result
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing import routing_standin as routing
from world_systems import gepa_available

OUT = Path(__file__).parent / "out"
ROOT = Path(__file__).resolve().parents[1]
SOLVE_SECONDS, REFLECT_SECONDS = 0.02, 0.08
WORKERS = 4
GEPA_START = "Route the tickets."
RUNTIMES = ("sync", "async", "published")


def latency(median: float, *key: object) -> float:
    """A seeded lognormal latency (σ 0.5) for one call."""
    rng = random.Random(hash(key) & 0xFFFFFFFF)
    return median * math.exp(0.5 * rng.gauss(0.0, 1.0))


def slow_solver(solve: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`solve` behind a model-like latency."""
    async def solver(rendered: Any, task: Any) -> Any:
        await anyio.sleep(latency(SOLVE_SECONDS, task.id, str(rendered)[:64]))
        return solve(rendered, task)
    return solver


def slow_reflector(script: Callable[..., str]) -> CallableProvider:
    """A scripted reflector behind a model-like latency, reporting tokens (4 characters a token)."""
    calls = [0]

    async def answer(messages: Sequence[Message], **params: Any) -> Completion:
        calls[0] += 1
        await anyio.sleep(latency(REFLECT_SECONDS, calls[0]))
        text = script(messages, **params)
        prompt = sum(len(m.content) for m in messages)
        return Completion(text, Usage(prompt // 4, len(text) // 4), 0.0, "scripted")
    return CallableProvider(answer, name="scripted")


def _text_method(name: str, script: Callable[..., str], **options: Any) -> Callable[[], tuple[Any, dict[str, Any]]]:
    def setup() -> tuple[Any, dict[str, Any]]:
        module = __import__(f"agentgrad.algorithms.{name}", fromlist=[name])
        return getattr(module, name), {"run": slow_solver(routing.solve), "reflector": slow_reflector(script),
                                       **options}
    return setup


def _code_method(name: str, script: Callable[..., str], **options: Any) -> Callable[[], tuple[Any, dict[str, Any]]]:
    """A method that evolves code: its programs run in the sandbox (no stand-in solver, no added latency)."""
    def setup() -> tuple[Any, dict[str, Any]]:
        from tests.algorithms.test_adas_support import FAST

        from agentgrad.sandbox import Sandbox

        module = __import__(f"agentgrad.algorithms.{name}", fromlist=[name])
        return getattr(module, name), {"reflector": slow_reflector(script), "sandbox": Sandbox(FAST), **options}
    return setup


def methods() -> dict[str, Callable[[], tuple[Any, dict[str, Any]]]]:
    """Each method's entry point and arguments (its scripted reflector comes from its tests)."""
    from tests.algorithms import (
        test_ace,
        test_adas,
        test_dgm,
        test_evoskill,
        test_gepa,
        test_meta_harness,
        test_opro,
        test_reflexion,
        test_skillneo,
        test_skillopt,
    )
    return {
        "gepa": _text_method("gepa", test_gepa.reflect, artifact=GEPA_START),  # the published row: published()
        "gepa_engine": _text_method("gepa", test_gepa.reflect, artifact=GEPA_START, admission="engine"),
        "ace": _text_method("ace", test_ace.scripted),
        "opro": _text_method("opro", test_opro.Optimizer(), candidates=4),
        "reflexion": _text_method("reflexion", test_reflexion.scripted),
        "evoskill": _text_method("evoskill", test_evoskill.model, category="queue_name"),
        "skillopt": _text_method("skillopt", test_skillopt.Optimizer()),
        "skillneo": _text_method("skillneo", test_skillneo.Writer()),
        "meta_harness": _text_method("meta_harness", test_meta_harness.model),
        "adas": _code_method("adas", test_adas.MetaAgent(), eval_tasks=12, reflections=1, examples=8),
        "dgm": _code_method("dgm", test_dgm.Improver(), stage=6, eval_tasks=12, examples=4),
    }


CODE_METHODS = ("adas", "dgm")


def _commit_times(run_dir: Path) -> dict[int, float]:
    """Seconds from the run's first call to each version's commit."""
    with SQLiteStore(run_dir, git=False) as store:
        events = store.journal.read(["dispatch", "commit"])
    start = min((e.at for e in events if e.kind == "dispatch"), default=0.0)
    return {int(e.payload["version"]): e.at - start for e in events if e.kind == "commit"}


def _held_out(result: Result, text: str) -> float:
    """The test reward of `text` with the stand-in (a library: its members' texts together)."""
    return _reward_on([t for t in routing.tasks() if t.id in _test_ids(result)], text)


def _reward_on(tasks: Sequence[Task], text: str) -> float:
    """The mean reward of `text` on `tasks` with the stand-in, without latency (no calls counted)."""
    rendered: Any = unpack(text) if is_packed(text) else text
    return sum(routing.score(t, routing.solve(rendered, t)) for t in tasks) / max(1, len(tasks))


def _test_ids(result: Result) -> set[str]:
    with SQLiteStore(result.run_dir, git=False) as store:
        events = store.journal.read(["done"])
    return {str(e.payload["task"]) for e in events if e.payload.get("kind") == "test_evals"}


def one_run(name: str, asynchronous: bool, calls: int, seed: int, target: float) -> dict[str, Any]:
    """One method, one runtime, one seed: the figures of the run."""
    entry, kwargs = methods()[name]()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = entry(routing.tasks(), routing.score, budget=Budget(calls=calls), asynchronous=asynchronous,
                       workers=WORKERS, store=Path(tmp) / "run", seed=seed, **kwargs)
        wall = time.perf_counter() - started
        times = _commit_times(result.run_dir)
        reached = [] if name in CODE_METHODS else [  # a program's held-out score would need the sandbox again
            times.get(v.number) for v in result.history if v.number and _held_out(result, v.text) >= target]
        usage = result.usage
        return {"method": name, "runtime": "async" if asynchronous else "sync", "asynchronous": asynchronous,
                "seed": seed, "ok": result.ok,
                "error": None if result.ok else str(result.error), "baseline": result.baseline_test_reward,
                "learned": result.test_reward,
                "gain": (result.test_reward or 0.0) - (result.baseline_test_reward or 0.0),
                "calls": usage.rollouts + usage.gate_evals, "proposals": usage.proposals, "tokens": usage.tokens,
                "loop_seconds": usage.wall_time, "wall_seconds": wall, "commits": len(result.history) - 1,
                "proposals_per_second": usage.proposals / usage.wall_time if usage.wall_time else 0.0,
                "time_to_target": next((t for t in reached if t is not None), None)}


def published(calls: int, seed: int, target: float) -> dict[str, Any]:
    """GEPA's published loop (the `gepa` package, gepa_published.py) on the recipe's splits of `seed`, from its
    text, with its solver and scripted reflector (test_gepa.reflect) behind the same latencies."""
    from tests.algorithms import test_gepa

    from gepa_published import optimize_routing, published_row

    splits = split(routing.tasks(), seed=seed)  # as the engine splits the recipe's tasks
    run = optimize_routing(splits, GEPA_START, slow_solver(routing.solve), routing.score,
                           slow_reflector(test_gepa.reflect), calls=calls, seed=seed, slots=WORKERS)
    return published_row(run, lambda text: _reward_on(splits.test, text), GEPA_START, seed, target)


def published_rows(args: argparse.Namespace, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """The published rows, here if gepa is importable, else in `--gepa-python`, else none (with a note)."""
    if gepa_available():
        return [published(args.calls, seed, args.target) for seed in seeds]
    if not Path(args.gepa_python).exists():
        print(f"note: the gepa_published row is skipped: gepa is not importable here and {args.gepa_python} does "
              "not exist (make bench-gepa builds it)", flush=True)
        return []
    command = [args.gepa_python, str(Path(__file__).resolve()), "--gepa-child", "--calls", str(args.calls),
               "--seeds", ",".join(map(str, seeds)), "--target", str(args.target)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the gepa child failed ({done.returncode}): {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per method and runtime: means over seeds (time to target over the seeds that reached it)."""
    out = []
    for name in dict.fromkeys(r["method"] for r in rows):
        for runtime in RUNTIMES:
            group = [r for r in rows if r["method"] == name and r["runtime"] == runtime]
            if not group:
                continue
            hit = [r["time_to_target"] for r in group if r["time_to_target"] is not None]
            mean = {k: sum(r[k] for r in group) / len(group) for k in
                    ("gain", "calls", "proposals", "tokens", "loop_seconds", "wall_seconds", "proposals_per_second")}
            out.append({"method": name, "runtime": runtime, "runs": len(group),
                        "ok": all(r["ok"] for r in group), **mean, "reached_target": len(hit),
                        "time_to_target": sum(hit) / len(hit) if hit else None})
    return out


def plot(summary: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Held-out gain and proposals per second: a bar per method and runtime (sync, async, GEPA's published loop)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(s["method"] for s in summary))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for offset, runtime in zip((-0.27, 0.0, 0.27), RUNTIMES, strict=True):
        rows = {s["method"]: s for s in summary if s["runtime"] == runtime}
        if not rows:
            continue
        xs = [i + offset for i in range(len(names))]
        axes[0].bar(xs, [rows[n]["gain"] if n in rows else 0 for n in names], width=0.27, label=runtime)
        axes[1].bar(xs, [rows[n]["proposals_per_second"] if n in rows else 0 for n in names], width=0.27,
                    label=runtime)
    for ax, title in zip(axes, ("held-out gain at equal calls", "proposals per second"), strict=True):
        ax.set_xticks(range(len(names)), names, rotation=30)
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(methods()), help="comma-separated method names")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--target", type=float, default=0.6, help="the held-out reward to time")
    parser.add_argument("--out", type=Path, default=OUT / "algorithms.json")
    parser.add_argument("--no-published", action="store_true", help="leave out GEPA's published loop")
    parser.add_argument("--gepa-python", default=str(ROOT / ".venv-gepa" / "bin" / "python"),
                        help="a Python with gepa, for the published row when gepa is not importable here")
    parser.add_argument("--gepa-child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = arguments()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.gepa_child:  # in --gepa-python: only the published rows, one JSON line each
        for seed in seeds:
            print(json.dumps(published(args.calls, seed, args.target)), flush=True)
        return
    rows = []
    for name in args.methods.split(","):
        for seed in seeds:
            for asynchronous in (False, True):
                row = one_run(name, asynchronous, args.calls, seed, args.target)
                rows.append(row)
                print(json.dumps(row))
        if name == "gepa" and not args.no_published:
            for row in published_rows(args, seeds):
                rows.append(row)
                print(json.dumps(row))
    summary = summarise(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"calls": args.calls, "target": args.target, "runs": rows, "summary": summary},
                                   indent=1))
    plot(summary, args.out.with_suffix(".png"))
    for s in summary:
        ttt = "-" if s["time_to_target"] is None else f"{s['time_to_target']:.1f}s"
        print(f"{s['method']:12s} {s['runtime']:9s} gain {s['gain']:+.2f} calls {s['calls']:.0f} proposals "
              f"{s['proposals']:.0f} tokens {s['tokens']:.0f} loop {s['loop_seconds']:.1f}s "
              f"wall {s['wall_seconds']:.1f}s {s['proposals_per_second']:.1f} prop/s to-target {ttt}")


if __name__ == "__main__":
    main()

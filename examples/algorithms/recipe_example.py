"""What the local-model examples of the recipes share: the command line, the run directory, and what they print."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgrad import Budget, load_set
from agentgrad.agents.skill import scoring
from agentgrad.data.shipped import recommended_scorer

#: The solver's sampling in every example: greedy, a short answer (a label or a code).
SOLVE = {"temperature": 0.0, "max_tokens": 24}


def parser(doc: str, *, task_set: str = "sentiment", calls: int = 80,
           seconds: float | None = None) -> argparse.ArgumentParser:
    """--set, --model, --calls, --seconds (the example's wall-time default; None: no limit), --async and
    --run-dir."""
    cli = argparse.ArgumentParser(description=doc.splitlines()[0])
    cli.add_argument("--set", default=task_set, help="a shipped task set")
    cli.add_argument("--model", default="local", help="local, openai:<model> or anthropic:<model>")
    cli.add_argument("--calls", type=int, default=calls, help="the call budget (rollouts and gate together)")
    cli.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    cli.add_argument("--run-dir", type=Path, default=None, help="where the run is kept (default: a new temp dir)")
    cli.add_argument("--seconds", type=float, default=seconds, help="the wall-time budget (default: "
                     + ("none" if seconds is None else f"{seconds:g}") + ")")
    return cli


def arguments(doc: str, *, task_set: str = "sentiment", calls: int = 80) -> argparse.Namespace:
    """The common command line alone."""
    return parser(doc, task_set=task_set, calls=calls).parse_args()


def run_dir(args: argparse.Namespace, name: str) -> Path:
    """--run-dir, or a fresh temporary one named after the method."""
    chosen: Path | None = args.run_dir
    return chosen or Path(tempfile.mkdtemp(prefix=f"agentgrad-{name}-")) / "run"


def budget(args: argparse.Namespace) -> Budget:
    """The calls, and the wall time when one is set."""
    seconds: float | None = args.seconds
    return Budget(calls=args.calls) if seconds is None else Budget(calls=args.calls, wall_time=seconds)


def task_inputs(args: argparse.Namespace) -> tuple[Any, Any]:
    """The shipped set and its recommended scoring."""
    return load_set(args.set), scoring(recommended_scorer(args.set))


def report(result: Any, label: str = "learned") -> int:
    """Print the summary and the learned text; the exit code says whether the run was ok."""
    print(result.summary())
    print(f"{label}:\n" + (result.rendered or result.artifact.text or "(empty)"))
    return 0 if result.ok else 1


def call_recipe(entry: Callable[..., Any], args: argparse.Namespace, *, store: Path, **options: Any) -> Any:
    """One method's entry point on the shipped set, with the command line's budget and runtime (and its model,
    unless `options` name one: pass a provider already loaded so that the local model is loaded once)."""
    tasks, score = task_inputs(args)
    chosen = {"model": args.model, **options}
    return entry(tasks, score, budget=budget(args), asynchronous=args.asynchronous, store=store, **chosen)


def run_recipe(entry: Callable[..., Any], args: argparse.Namespace, *, name: str, artifact: str,
               **options: Any) -> int:
    """A text-artifact method with the model as solver: run it, print what it learned."""
    result = call_recipe(entry, args, store=run_dir(args, name), artifact=artifact, solve_params=SOLVE, **options)
    return report(result)


def local_solver(args: argparse.Namespace, **params: Any) -> tuple[Any, Any]:
    """The command line's model, loaded once: the solver (greedy, a short answer, unless `params` say otherwise)
    and the provider itself."""
    from agentgrad.agents.llm import LLMAgent
    from agentgrad.agents.skill import resolve_model

    provider = resolve_model(args.model)
    return LLMAgent(provider, params={**SOLVE, **params}).run, provider


def evolve_method(method: Any, args: argparse.Namespace, *, store: Path, timeout: float, **options: Any) -> Any:
    """A built recipe (`recipe(...)`) on the shipped set, each proposal allowed `timeout` seconds (a CPU model)."""
    from dataclasses import replace

    tasks, score = task_inputs(args)
    timed = replace(method, config=replace(method.config, timeout=timeout))
    return timed.evolve(tasks, score, budget=budget(args), asynchronous=args.asynchronous, workers=2, store=store,
                        **options)

"""What the local-model examples of the recipes share: the command line, the run, and what it prints."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgrad import Budget, load_set
from agentgrad.agents.skill import scoring
from agentgrad.data.shipped import recommended_scorer


def arguments(doc: str, *, task_set: str = "routing", calls: int = 80) -> argparse.Namespace:
    """--set, --model, --calls and --async."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--set", default=task_set, help="a shipped task set")
    parser.add_argument("--model", default="local", help="local, openai:<model> or anthropic:<model>")
    parser.add_argument("--calls", type=int, default=calls, help="the call budget")
    parser.add_argument("--async", dest="asynchronous", action="store_true", help="the asynchronous runtime")
    return parser.parse_args()


def run_recipe(entry: Callable[..., Any], args: argparse.Namespace, *, name: str, artifact: str,
               **options: Any) -> int:
    """Run one method's entry point on the shipped set with the model; print the summary and what was learned."""
    store = Path(tempfile.mkdtemp(prefix=f"agentgrad-{name}-")) / "run"
    result = entry(load_set(args.set), scoring(recommended_scorer(args.set)), model=args.model, artifact=artifact,
                   budget=Budget(calls=args.calls), asynchronous=args.asynchronous, store=store,
                   solve_params={"temperature": 0.0, "max_tokens": 16}, **options)
    print(result.summary())
    print("learned:\n" + result.artifact.text)
    return 0 if result.ok else 1

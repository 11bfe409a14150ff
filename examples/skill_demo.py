"""Evolve a real model's skill on a shipped task set, and explain every decision.

With no key set, the model is the local one (Qwen2.5-Coder-0.5B-Instruct, run by llama.cpp inside this process).
With OPENAI_BASE_URL / OPENAI_API_KEY (or ANTHROPIC_API_KEY) set, the same command uses that hosted model.
The skill starts empty (or as --skill says): the model answers each review with a paragraph, and strict matching
scores that 0. The model then reflects on its own failures (for a small local model through a few-shot scaffold
whose reply llama.cpp holds to ``{"rule": "..."}``), every proposed rule is screened on the task it came from and
tested against the current skill on validation tasks, and only a rule that is very likely better is kept. At the
end the starting and the learned skill are both scored on held-out test tasks that no decision ever saw.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentgrad.agents.skill import default_model, evolve_skill
from agentgrad.data.shipped import available_sets, load_set, recommended_scorer
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.runtime.result import Result


def describe(op: Mapping[str, Any]) -> str:
    """One diff op as a person reads it: the rule added, or the rule replaced and by what."""
    if op.get("action") == "replace":
        return f"replace {op.get('old')!r} by {op.get('new')!r}"
    return f"{op.get('action')} {op.get('new') or op.get('old')!r}"


class Progress:
    """A callback that prints the run as it goes: proposals, verdicts (with reasons) and commits.

    State: when the run started and how many calls of each stage ended (for the closing line).
    """

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.calls: dict[str, int] = {}

    def stamp(self) -> str:
        return f"[{time.perf_counter() - self.start:5.0f}s]"

    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "started":
            splits = payload["splits"]
            print(f"{self.stamp()} run started: {splits['train']} training tasks, {splits['val']} validation "
                  f"tasks, budget {payload['budget']}")
        elif kind == "call":
            self.calls[payload["stage"]] = self.calls.get(payload["stage"], 0) + 1
        elif kind == "proposal":
            print(f"{self.stamp()} {payload['diff']['id']} proposed from {payload['task']}: "
                  + "; ".join(describe(op) for op in payload["diff"]["ops"]))
        elif kind == "proposal_failed":
            print(f"{self.stamp()}   a proposal was not usable ({payload['kind']}): {payload['error'][:90]}")
        elif kind == "decision" and payload["outcome"] not in ("recheck", "deferred"):
            mark = "KEPT" if payload["outcome"] in ("accepted", "fused") else payload["outcome"]
            print(f"{self.stamp()}   {payload['diff_id']} {mark} [{payload['stage']}]: {payload['reason'][:110]}")
        elif kind == "commit":
            print(f"{self.stamp()}   => skill version {payload['version']} committed ({payload['diff']})")
        elif kind == "held_out":
            print(f"{self.stamp()} scoring the starting and the learned skill on {payload['tasks']} held-out tasks")
        elif kind == "finished":
            print(f"{self.stamp()} run finished; calls by stage: {self.calls}")


def report(result: Result, skill: str, started: float) -> None:
    """Print the before -> after held-out accuracy, the learned skill, why each edit went its way, and usage."""
    print("\nstarting skill:", repr(skill) if skill else "(empty)")
    print("learned skill:\n" + ("\n".join("  " + line for line in result.rendered.splitlines()) or "  (empty)"))
    if result.test_reward is not None and result.baseline_test_reward is not None:
        print(f"\nheld-out accuracy ({result.protocol}): {result.baseline_test_reward:.2f} -> {result.test_reward:.2f}")
    print("\nwhy each proposed edit was kept or not:")
    for item in result.outcomes():
        print(f"  {item['diff']} {item['outcome']:<9} [{item['stage']}] {item['reason'][:100]}")
    usage = result.usage
    print(f"\nusage: {usage.rollouts} rollouts, {usage.proposals} proposals, {usage.gate_evals} gate evaluations, "
          f"{usage.test_evals} test evaluations, {usage.tokens} tokens (cost ${usage.cost:.4f}); "
          f"run {usage.wall_time:.0f} s, demo {time.perf_counter() - started:.0f} s in all")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="sentiment", choices=available_sets(), help="shipped task set")
    parser.add_argument("--skill", default="", help="the starting skill (default: empty)")
    parser.add_argument("--model", default=None, help="'local', 'openai:<model>', ... (default: from env)")
    parser.add_argument("--proposer", default=None, choices=["rule", "edits"],
                        help="how proposals are asked for (default: 'rule' for the local model, else 'edits')")
    parser.add_argument("--rollouts", type=int, default=24)
    parser.add_argument("--gate-evals", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=120.0, help="wall-time budget of the run")
    parser.add_argument("--max-tokens", type=int, default=24, help="most tokens in one answer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=None, help="keep the run here (default: a temp dir)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    model = args.model or default_model()
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="agentgrad-skill-demo-")) / "run"
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"evolving a skill for {model} on the shipped '{args.set}' set (scored by "
          f"{recommended_scorer(args.set)}); run directory {run_dir}")
    result = evolve_skill(load_set(args.set), model=model, score=recommended_scorer(args.set), skill=args.skill,
                          budget=Budget(rollouts=args.rollouts, gate_evals=args.gate_evals, wall_time=args.seconds),
                          workers=Workers(rollout=2, propose=2, gate=1, slots=3), seed=args.seed, store=run_dir,
                          params={"temperature": 0.0, "max_tokens": args.max_tokens}, proposer=args.proposer,
                          callbacks=[Progress()])
    report(result, args.skill, started)
    if not result.ok:
        print(f"the run failed: {type(result.error).__name__}: {result.error}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

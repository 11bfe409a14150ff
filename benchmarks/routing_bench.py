"""Routing with the local 0.5B model: demonstrations learned by agentgrad against hand-picked ones and gepa.

The shipped `routing` set (92 support messages -> 8 arbitrary queue codes such as ``KTR-4``, Zipf-like queue
sizes; split 46 / 23 / 23 by the seed) with Qwen2.5-Coder-0.5B-Instruct solving at temperature 0 (16 tokens at
most). Every system solves with the same `DemoAgent.run`: the skill's examples as earlier conversation turns,
the rest of the skill as the system message. Systems, at the same budget of solver calls (``--calls``: rollouts
plus gate evaluations; gepa's ``max_metric_calls``; the held-out scoring is not counted):

- ``empty``: the empty skill (no optimisation; its figure is the baseline `evolve_skill` measures).
- ``hand_picked``: as many examples as the learned skill of ``agentgrad_demos`` holds (8 if it holds none),
  taken round-robin over the queues in the order they first appear in the training split: the first training
  message of each queue, then the second of each, and so on (no optimisation).
- ``agentgrad_demos``: ``evolve_skill(..., proposer="demos")``, synchronous, 2 workers: each proposal is a failed
  training message with its gold code (no model call), kept or not by the gate.
- ``gepa``: the published ``gepa`` package (``gepa.optimize`` with its defaults) over a small adapter, with its
  own reflective proposer (its instruction-proposal prompt) on the same model at temperature 0.7 (256 tokens at
  most); the feedback of each minibatch example names the expected code. gepa is not installed in the main
  environment: the script then runs that system in ``.venv-gepa`` (``--gepa-python``), talking to the same
  llama.cpp server over HTTP.
- ``agentgrad_demos_rules`` (with ``--systems``): ``proposer="demos+rules"``.

Reported per system and seed: held-out (test) accuracy, solver calls used, seconds (optimisation only), the
number of examples in the skill. Writes benchmarks/out/routing_bench.json. ``--quick``: one seed (the first).
The model shares the CPU with everything else on the machine: seconds are noisy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from agentgrad.agents.demo_agent import DemoAgent
from agentgrad.agents.skill import evolve_skill, make_agent, scoring
from agentgrad.core.diff import apply_ops
from agentgrad.data.shipped import load_set, recommended_scorer
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task
from agentgrad.errors import InvalidProposalError
from agentgrad.providers.base import Message, Provider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from agentgrad.strategies.demos import Demonstrations, demo_from_failure, examples, split_proposal
from world_systems import GepaLog

OUT = Path(__file__).parent / "out"
ROOT = Path(__file__).parents[1]
SET = "routing"
SOLVE = {"temperature": 0.0, "max_tokens": 16}
REFLECT = {"temperature": 0.7, "max_tokens": 256}
SLOTS = 2
COMPONENT = "skill"
SYSTEMS = ("empty", "hand_picked", "agentgrad_demos", "gepa", "agentgrad_demos_rules")
DEFAULT_SYSTEMS = SYSTEMS[:4]
STRATEGY = Demonstrations()
REWARD = scoring(recommended_scorer(SET))


@dataclass(frozen=True)
class Shown:
    """How every system's solver shows a skill's examples (`DemoAgent`): the `nearest` ones only (None: all),
    answers `closed` to those shown."""

    nearest: int | None = None
    closed: bool = False


def solver(provider: Provider, seed: int, shown: Shown) -> DemoAgent:
    """The agent every system solves with (no proposals asked of it here), showing examples as `shown` says."""
    return DemoAgent(make_agent(provider, local=True, proposer="rule", seed=seed, params=SOLVE),
                     nearest=shown.nearest, closed=shown.closed)


async def _outputs(agent: DemoAgent, text: str, tasks: Sequence[Task]) -> list[str]:
    """The agent's answers on `tasks` with the skill `text`, `SLOTS` calls at a time."""
    outputs = [""] * len(tasks)
    limiter = anyio.CapacityLimiter(SLOTS)

    async def one(index: int) -> None:
        async with limiter:
            outputs[index] = (await agent.run(STRATEGY.render(text), tasks[index])).text

    async with anyio.create_task_group() as group:
        for index in range(len(tasks)):
            group.start_soon(one, index)
    return outputs


def answers(agent: DemoAgent, text: str, tasks: Sequence[Task]) -> list[str]:
    """The agent's answers on `tasks` with the skill `text`."""
    return anyio.run(_outputs, agent, text, tasks)


def accuracy(agent: DemoAgent, text: str, tasks: Sequence[Task]) -> float:
    """Mean reward of the skill `text` on `tasks`."""
    outputs = answers(agent, text, tasks)
    return sum(REWARD(t, o) for t, o in zip(tasks, outputs, strict=True)) / len(tasks)


def shown_examples(text: str) -> int:
    """The examples a skill holds: stored example lines, or Input/Answer blocks of free text (gepa's)."""
    try:
        return len(examples(text)) or len(split_proposal(text)[0])
    except InvalidProposalError:
        return 0


def hand_picked_text(train: Sequence[Task], k: int) -> str:
    """`k` training examples, round-robin over the queues in the order they first appear (see the module doc)."""
    queues: dict[str, list[Task]] = {}
    for task in train:
        queues.setdefault(str(task.expected), []).append(task)
    picked = [q[i] for i in range(len(train)) for q in queues.values() if i < len(q)][:k]
    text = ""
    for task in picked:
        demo = demo_from_failure(task)
        assert demo is not None
        text = apply_ops(text, STRATEGY.ops(demo, text))
    return text


def run_agentgrad(model: Provider, tasks: Sequence[Task], calls: int, seed: int, proposer: str,
                  shown: Shown) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        result = evolve_skill(tasks, model=model, score=recommended_scorer(SET), proposer=proposer, params=SOLVE,
                              nearest=shown.nearest, closed=shown.closed,
                              budget=Budget(calls=calls), seed=seed, store=Path(folder) / "run",
                              workers=Workers(rollout=SLOTS, propose=1, gate=SLOTS, slots=SLOTS), asynchronous=False)
    if not result.ok:
        raise RuntimeError(f"evolve_skill failed: {result.error}")
    u = result.usage
    return {"test_accuracy": result.test_reward, "calls": u.rollouts + u.gate_evals, "seconds": round(u.wall_time, 1),
            "examples": len(examples(result.artifact.text)), "proposals": u.proposals,
            "accepted": len(result.accepted()), "baseline_test": result.baseline_test_reward,
            "skill": result.artifact.text}


class RoutingAdapter:
    """A `gepa.GEPAAdapter` for a skill on the routing set: one component, whose answers on a batch come from
    `outputs(text, batch)` (here `DemoAgent.run`; algorithms.py: the offline stand-in), scored by `reward`; gepa's
    own proposer writes new texts (`propose_new_texts` is None), from records whose feedback names the expected
    answer."""

    propose_new_texts = None

    def __init__(self, outputs: Callable[[str, list[Task]], list[str]], batch_type: Any,
                 reward: Callable[[Task, Any], float] = REWARD) -> None:
        self.outputs, self.batch_type, self.reward = outputs, batch_type, reward

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        outputs = self.outputs(candidate[COMPONENT], batch)
        scores = [self.reward(t, o) for t, o in zip(batch, outputs, strict=True)]
        traces = [{"task": t, "output": o, "score": s} for t, o, s in zip(batch, outputs, scores, strict=True)]
        return self.batch_type(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        records = [{"Inputs": tr["task"].input, "Generated Outputs": tr["output"],
                    "Feedback": "correct" if tr["score"] >= 1.0 else
                    f"wrong: the expected answer is {tr['task'].expected}"} for tr in eval_batch.trajectories]
        return {name: records for name in components_to_update}


class Reflector:
    """gepa's reflection LM: one sampled call to `provider` per prompt (seeded); counts calls, seconds and the
    tokens the provider reported."""

    def __init__(self, provider: Provider, seed: int) -> None:
        self.provider, self.seed, self.calls, self.seconds, self.tokens = provider, seed, 0, 0.0, 0

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        text = prompt if isinstance(prompt, str) else "\n".join(str(m.get("content", "")) for m in prompt)
        start, self.calls = time.perf_counter(), self.calls + 1
        reply = anyio.run(lambda: self.provider.complete([Message("user", text)], **REFLECT,
                                                         seed=self.seed + self.calls))
        self.seconds += time.perf_counter() - start
        self.tokens += reply.usage.input_tokens + reply.usage.output_tokens
        return reply.text


def run_gepa(provider: Provider, splits: Splits, calls: int, seed: int, cap: float, shown: Shown) -> dict[str, Any]:
    """gepa.optimize (its defaults) from the empty skill, `calls` metric calls (or `cap` seconds)."""
    gepa = importlib.import_module("gepa")
    batch_type = importlib.import_module("gepa.core.adapter").EvaluationBatch
    timeout = importlib.import_module("gepa.utils").TimeoutStopCondition(cap)
    agent, reflector, log = solver(provider, seed, shown), Reflector(provider, seed), GepaLog()
    start = time.perf_counter()
    result = gepa.optimize(seed_candidate={COMPONENT: ""}, trainset=list(splits.train), valset=list(splits.val),
                           adapter=RoutingAdapter(partial(answers, agent), batch_type), reflection_lm=reflector,
                           logger=log, max_metric_calls=calls, stop_callbacks=[timeout], seed=seed)
    seconds = time.perf_counter() - start
    if log.errors:
        raise RuntimeError(f"gepa skipped work after an error: {log.errors[0]}")
    text = result.best_candidate[COMPONENT]
    return {"test_accuracy": accuracy(agent, text, splits.test), "calls": result.total_metric_calls,
            "seconds": round(seconds, 1), "examples": shown_examples(text), "proposals": reflector.calls,
            "reflection_seconds": round(reflector.seconds, 1), "candidates": len(result.candidates), "skill": text}


def shown_of(args: argparse.Namespace) -> Shown:
    """How the solvers show examples, from the command line."""
    return Shown(args.nearest, args.closed)


def gepa_elsewhere(base_url: str, alias: str, calls: int, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """The gepa system in `--gepa-python` (gepa is not importable here), on this process's llama.cpp server."""
    command = [args.gepa_python, str(Path(__file__).resolve()), "--gepa-child", base_url, alias, "--calls",
               str(calls), "--seeds", str(seed), "--gepa-cap", str(args.gepa_cap),
               *([] if args.nearest is None else ["--nearest", str(args.nearest)]),
               *(["--closed"] if args.closed else [])]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the gepa child failed ({done.returncode}): {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def gepa_child(args: argparse.Namespace) -> None:
    """Run only the gepa system against the server at `--gepa-child URL ALIAS`; print its row as JSON."""
    from agentgrad.providers.openai_compat import OpenAICompatible
    base_url, alias = args.gepa_child
    provider = OpenAICompatible(base_url, model=alias, timeout=300.0, name=f"local:{alias}")
    seed = args.seeds[0]
    splits = split(load_set(SET), seed=seed)
    print(json.dumps(run_gepa(provider, splits, args.calls, seed, args.gepa_cap, shown_of(args))), flush=True)


def gepa_importable() -> bool:
    try:
        importlib.import_module("gepa")
    except ImportError:
        return False
    return True


def run_seed(model: Any, seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every chosen system on the split of `seed`; rows in the order run."""
    tasks = load_set(SET)
    splits = split(tasks, seed=seed)
    rows: list[dict[str, Any]] = []
    shown = shown_of(args)

    def add(system: str, row: Mapping[str, Any]) -> None:
        rows.append({"system": system, "seed": seed, **row})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "skill"}), flush=True)

    learned = None
    for system in ("agentgrad_demos", "agentgrad_demos_rules"):
        if system in args.systems:
            add(system, run_agentgrad(model, tasks, args.calls, seed, system.removeprefix("agentgrad_").replace(
                "_", "+"), shown))
            learned = learned if learned is not None else rows[-1]
    if "empty" in args.systems:
        start = time.perf_counter()
        value = learned["baseline_test"] if learned else accuracy(solver(model, seed, shown), "", splits.test)
        add("empty", {"test_accuracy": value, "calls": 0, "seconds": round(time.perf_counter() - start, 1),
                      "examples": 0})
    if "hand_picked" in args.systems:
        k = learned["examples"] if learned and learned["examples"] else 8
        text = hand_picked_text(splits.train, k)
        add("hand_picked", {"test_accuracy": accuracy(solver(model, seed, shown), text, splits.test), "calls": 0,
                            "seconds": 0.0, "examples": k, "skill": text})
    if "gepa" in args.systems:
        add("gepa", run_gepa(model, splits, args.calls, seed, args.gepa_cap, shown) if gepa_importable()
            else gepa_elsewhere(model.base_url, model.stats.alias, args.calls, seed, args))
    return rows


def latency(model: Any, seed: int) -> float:
    """Seconds of one solving call (the median of three, after one to warm the server)."""
    tasks = split(load_set(SET), seed=seed).test[:4]
    agent, times = solver(model, seed, Shown()), []
    for task in tasks:
        start = time.perf_counter()
        anyio.run(agent.run, "", task)
        times.append(time.perf_counter() - start)
    return round(sorted(times[1:])[1], 2)


def summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per system: mean test accuracy, calls, seconds and examples over the seeds."""
    table = []
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        table.append({"system": system, **{key: round(sum(float(r[key] or 0) for r in mine) / len(mine), 3)
                                          for key in ("test_accuracy", "calls", "seconds", "examples")}})
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=240, help="solver calls per optimising system")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--quick", action="store_true", help="one seed (the first)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(DEFAULT_SYSTEMS))
    parser.add_argument("--gepa-python", default=str(ROOT / ".venv-gepa" / "bin" / "python"))
    parser.add_argument("--gepa-cap", type=float, default=900.0, help="gepa's wall-time cap in seconds")
    parser.add_argument("--gepa-child", nargs=2, metavar=("URL", "ALIAS"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=OUT / "routing_bench.json")
    parser.add_argument("--nearest", type=int, default=None,
                        help="every solver shows only this many examples, the most like each message")
    parser.add_argument("--closed", action="store_true",
                        help="every solver's answers are restricted to those its skill's examples show")
    args = parser.parse_args()
    if args.gepa_child:
        gepa_child(args)
        return
    seeds = args.seeds[:1] if args.quick else args.seeds
    from agentgrad.providers.local import local
    with local(n_parallel=SLOTS) as model:
        per_call = latency(model, seeds[0])
        print(json.dumps({"seconds_per_call": per_call}), flush=True)
        rows = [row for seed in seeds for row in run_seed(model, seed, args)]
    report = {"model": model.stats.alias, "set": SET, "calls": args.calls, "seeds": seeds, "slots": SLOTS,
              "seconds_per_call": per_call, "summary": summary(rows), "rows": rows}
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for line in report["summary"]:
        print(json.dumps(line))


if __name__ == "__main__":
    main()

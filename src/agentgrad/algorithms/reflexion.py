"""Reflexion (Shinn et al. 2023) as a recipe: verbal self-reflection and retry within a task, and the reflections
that fixed a task kept as lessons.

On a training task, the solver wrapper runs a Reflexion episode: the agent answers with the lessons (the evolved
artifact); while an evaluator (the run's reward, or `evaluator`) judges the answer wrong, it writes a
self-reflection into the episode's memory and tries again with the last `window` reflections in context, up to
`trials` tries. Every attempt is kept (`attempts`, written to ``reflexion_attempts.json`` in the run directory).
Judged by the reward, the episode answers with its first try, so the reward measures what the lessons alone
achieve, as on validation and held-out tasks, which get one try: a label never shapes a scored answer. A
label-free `evaluator` (a heuristic, self-written tests) runs episodes on every task and answers with the last try:
Reflexion at test time. A failed rollout then proposes the
reflection after which a retry succeeded (verified on its own task) as a lesson; the acceptance test decides if
it carries over to other tasks. The proposal builds on the head: the lessons are one growing memory.
"""

from __future__ import annotations

import inspect
import json
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from itertools import pairwise
from pathlib import Path
from string import Template
from typing import Any

from agentgrad.algorithms.base import (
    Callback,
    Recipe,
    RecipeAgent,
    Reply,
    Reward,
    Solver,
    output_text,
    resolve,
    text_of,
)
from agentgrad.core.artifact import Artifact, content_hash
from agentgrad.core.library import Library
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.optim.trust_region import TrustRegion
from agentgrad.providers.base import Provider, Usage
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.strategies.rules import AppendRules

Evaluator = Callable[[Task, str], Any]  # (task, answer) -> bool (or an awaitable of one)
PLAN_CHARS = 600


def prompt(name: str) -> str:
    """The text of ``prompts/reflexion_<name>.md``."""
    return (resources.files("agentgrad.algorithms") / "prompts" / f"reflexion_{name}.md").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Attempt:
    """One try at a task: its episode and trial number, the answer, the verdict, and the reflection written after
    it ("" when it passed or was the last try)."""

    task_id: str
    episode: int
    trial: int
    answer: str
    passed: bool
    reflection: str = ""


@dataclass(frozen=True)
class Episode:
    """What the wrapper returns for an episode: the first try's answer as `text`, the usage of every call in it,
    and the tries (the engine scores `text` and charges `usage`)."""

    text: str
    usage: Usage = field(default_factory=Usage)
    attempts: tuple[Attempt, ...] = ()


def plan(reply: str) -> str:
    """The plan in a reflection reply: the text after the last "Plan:", else the reply, on one line, clipped."""
    head, marker, tail = reply.rpartition("Plan:")
    text = " ".join((tail if marker else head or reply).split())
    return text[:PLAN_CHARS]


def with_reflections(rendered: Any, header: str, reflections: Sequence[str]) -> Any:
    """What the solver sees on a retry: the lessons and then the episode's reflections (a library gets them as
    one more text, ``reflections``)."""
    if not reflections:
        return rendered
    block = header.strip() + "\n" + "\n".join(f"- {r}" for r in reflections)
    if isinstance(rendered, Mapping):
        return {**rendered, "reflections": block}
    return f"{str(rendered).rstrip()}\n\n{block}".lstrip()


def _usage(value: Any) -> Usage:
    usage = getattr(value, "usage", None)
    return usage if isinstance(usage, Usage) else Usage()


def _sum(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.cost + b.cost)


class ReflexionAgent(RecipeAgent):
    """The Reflexion loop around a solver, with an episodic memory per task and every attempt kept.

    Args:
        solver, reflector, seed, params: see `RecipeAgent` (the reflector writes the self-reflections).
        train: ids of the tasks whose episodes may retry, judged by the reward (training tasks: their labels may
            be used); other tasks get one try.
        trials: the most tries in an episode.
        window: how many of the latest reflections the solver sees on a retry (the released code keeps three).
        evaluator: judges an answer within an episode, `(task, answer) -> bool`, instead of the reward; it may
            then judge on any task (a heuristic or self-test evaluator needs no label).
        success: with the reward as evaluator, the score from which an answer passes.
        verified_only: propose only a reflection after which a retry passed; False proposes the latest one too.
        remember: how many attempts to keep (oldest dropped first).
        member: in a run over a library, the id of the lessons artifact.
    State: the attempts, each task's latest episode, the episode count (`state_dict`).
    """

    name = "reflexion"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, train: Collection[str] = (), trials: int = 3,
                 window: int = 3, evaluator: Evaluator | None = None, success: float = 1.0,
                 verified_only: bool = True, remember: int = 5000, member: str = "lessons") -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        if trials < 1 or window < 1 or remember < 1:
            raise ConfigError(f"reflexion: trials, window and remember must be >= 1, got {trials}, {window}, "
                              f"{remember}")
        self.train, self.trials, self.window, self.evaluator = frozenset(train), trials, window, evaluator
        self.success, self.verified_only, self.member = success, verified_only, member
        self.score: Reward | None = None
        self.attempts: deque[Attempt] = deque(maxlen=remember)
        self.latest: dict[str, tuple[str, list[Attempt]]] = {}  # task id -> (hash of the lessons, its attempts)
        self.episodes = 0
        self.run_dir: Path | None = None
        self.reflect_prompt, self.header = Template(prompt("reflect")), prompt("header")

    def reward(self, score: Reward) -> Reward:
        """The traced reward; it is also the episodes' evaluator unless `evaluator` was given."""
        self.score = score
        return super().reward(score)

    async def run(self, rendered: Any, task: Task) -> Any:
        """A Reflexion episode on a task that may retry; one plain try on any other."""
        if self.evaluator is None and (self.score is None or task.id not in self.train):
            return await super().run(rendered, task)
        episode = await self.episode(rendered, task)
        self.log.ran(text_of(rendered), task.id, episode.text)
        return episode

    async def episode(self, rendered: Any, task: Task) -> Episode:
        """Try, judge, reflect and retry, up to `trials` tries; every attempt is recorded."""
        self.episodes += 1
        number, usage = self.episodes, Usage()
        reflections: list[str] = []
        attempts: list[Attempt] = []
        for trial in range(1, self.trials + 1):
            output = await self._solve(with_reflections(rendered, self.header, reflections[-self.window:]), task)
            answer, usage = ("" if output is None else output_text(output)), _sum(usage, _usage(output))
            passed = await self._passes(task, answer)
            reflection = ""
            if not passed and trial < self.trials:
                reply = await self.ask(self._prompt(rendered, task, answer, reflections))
                reflection, usage = plan(str(reply.text)), _sum(usage, reply.usage)
                reflections.append(reflection)
            attempts.append(Attempt(task.id, number, trial, answer, passed, reflection))
            if passed:
                break
        self.attempts.extend(attempts)
        self.latest[task.id] = (content_hash(text_of(rendered)), attempts)
        answer = attempts[-1 if self.evaluator is not None else 0].answer
        return Episode(answer, usage, tuple(attempts))

    async def _solve(self, rendered: Any, task: Task) -> Any:
        output = self.solver(rendered, task)
        return await output if inspect.isawaitable(output) else output

    async def _passes(self, task: Task, answer: str) -> bool:
        judge = self.evaluator or self.score
        if judge is None:
            raise ConfigError("reflexion: an episode needs an evaluator (evaluator=) or the run's reward")
        verdict = judge(task, answer)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return bool(verdict) if self.evaluator is not None else float(verdict) >= self.success

    def _prompt(self, rendered: Any, task: Task, answer: str, reflections: Sequence[str]) -> str:
        earlier = "\n".join(f"Try {i}: {r}" for i, r in enumerate(reflections[-self.window:], 1)) or "(none)"
        return self.reflect_prompt.substitute(instructions=text_of(rendered) or "(none)", question=task.input,
                                              answer=answer or "(no answer)", earlier=earlier,
                                              feedback="The evaluator judged this answer wrong.")

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """The reflection after which a retry of this task passed, as a lesson; with `verified_only` off, else the
        latest reflection, else one asked for afresh (when no episode ran on this task)."""
        key, attempts = self.latest.get(task.id, ("", []))
        attempts = attempts if key == content_hash(text_of(rendered)) else []
        verified = next((a.reflection for a, b in pairwise(attempts) if b.passed and a.reflection), "")
        if verified or self.verified_only:
            if not verified:
                raise InvalidProposalError(f"reflexion: no reflection on task {task.id} led to a passing retry "
                                           f"({len(attempts)} tries)")
            return Reply(self._wrap(rendered, verified))
        latest = next((a.reflection for a in reversed(attempts) if a.reflection), "")
        if latest:
            return Reply(self._wrap(rendered, latest))
        answer = "" if output is None else output_text(output)
        reply = await self.ask(self._prompt(rendered, task, answer, []))
        return Reply(self._wrap(rendered, plan(str(reply.text))), reply.usage)

    def _wrap(self, rendered: Any, lesson: str) -> Any:
        return {self.member: lesson} if isinstance(rendered, Mapping) else lesson

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Write every attempt to the run directory when the run finishes."""
        if kind == "started":
            self.run_dir = Path(str(payload["run_dir"]))
        elif kind == "finished" and self.run_dir is not None:
            rows = [asdict(a) for a in self.attempts]
            (self.run_dir / "reflexion_attempts.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "episodes": self.episodes, "attempts": [asdict(a) for a in self.attempts],
                "latest": {t: [k, [asdict(a) for a in v]] for t, (k, v) in self.latest.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            attempts = [Attempt(**a) for a in data["attempts"]]
            latest = {str(t): (str(k), [Attempt(**a) for a in v]) for t, (k, v) in data["latest"].items()}
            episodes = int(data["episodes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDictError(f"reflexion: malformed recipe state ({exc})") from exc
        super().load_state_dict(data)
        self.attempts.clear()
        self.attempts.extend(attempts)
        self.latest, self.episodes = latest, episodes


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, train: Collection[str] = (), trials: int = 3,
           window: int = 3, evaluator: Evaluator | None = None, success: float = 1.0, verified_only: bool = True,
           member: str = "lessons", calls: int = 300, params: Mapping[str, Any] | None = None) -> Recipe:
    """Reflexion on the engine: `ReflexionAgent`, lessons as `AppendRules` bullets, a gate that scores validation
    tasks only (training tasks run whole episodes), a call timeout that covers an episode's calls, and a trust
    region of one short lesson at a time."""
    solver, writer = resolve(run, model, reflector)
    agent = ReflexionAgent(solver, writer, seed=seed, params=params, train=train, trials=trials, window=window,
                           evaluator=evaluator, success=success, verified_only=verified_only, member=member)
    config = RunConfig(workers=Workers(), gate=GateConfig(pool="val"), timeout=120.0 * (2 * trials - 1),
                       trust_region=TrustRegion(max_ops=4, max_chars=PLAN_CHARS * 2), asynchronous=False, seed=seed)
    return Recipe("reflexion", agent, AppendRules(), config, Budget(calls=calls))


def reflexion(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
              model: str | Provider | None = None, reflector: str | Provider | None = None,
              artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
              budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
              store: str | Path | None = None, seed: int = 0, callbacks: Sequence[Callback] = (),
              **options: Any) -> Result:
    """Evolve lessons with Reflexion (options: those of `recipe`: trials, window, evaluator, success, ...)."""
    splits = tasks if isinstance(tasks, Splits) else split(list(tasks), seed=seed)
    return recipe(run=run, model=model, reflector=reflector, seed=seed, train=[t.id for t in splits.train],
                  **options).evolve(splits, reward, artifact=artifact, budget=budget, asynchronous=asynchronous,
                                    workers=workers, store=store, seed=seed, callbacks=callbacks)

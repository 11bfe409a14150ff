"""What the code-evolving recipes (ADAS, DGM) share: a solver that runs the evolved program in the sandbox, the
agent base that traces it, and the bookkeeping that ties a proposed program to the engine's verdict on it.

The evolved artifact is Python source defining ``run(task_input: str) -> str`` (a harness, layer L1). The solver
renders it, calls ``run`` on the task's input in `agentgrad.sandbox` (no network, resource limits), and returns the
answer. A crash or a limit hit comes back as a `Crash`: an empty answer that carries the sandbox's error and is
scored 0, so a broken program fails its examples and never the run.
"""

from __future__ import annotations

import json
import random
import statistics
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from agentgrad.algorithms.base import RecipeAgent, Reply, Reward, Solver
from agentgrad.core.artifact import content_hash
from agentgrad.core.decision import Outcome
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.providers.base import Message, Provider, Usage
from agentgrad.sandbox import Sandbox, SandboxedFunction

ERRORS_KEPT = 2048  # sandbox errors remembered, (program, task) pairs
DRAFTS_KEPT = 256  # proposed programs awaiting a verdict
CLIP = 600


class Crash(str):
    """A call of an evolved program that failed (crash, limit hit, bad answer): an empty answer with its error."""

    error: str

    def __new__(cls, error: str) -> Crash:
        crash = super().__new__(cls, "")
        crash.error = error
        return crash


def task_input(task: Task) -> str:
    """The text an evolved program's `run` receives: the task's input (JSON when it is not a string)."""
    return task.input if isinstance(task.input, str) else json.dumps(task.input, sort_keys=True, default=str)


def code_of(rendered: Any, member: str | None = None) -> str:
    """The program in what the engine rendered: the text itself, or library member `member`."""
    if isinstance(rendered, str) and member is None:
        return rendered
    if isinstance(rendered, Mapping) and member is not None and member in rendered:
        return str(rendered[member])
    raise ConfigError(f"the evolved program is {'a text' if member is None else f'library member {member!r}'}, "
                      f"but the run rendered {type(rendered).__name__}"
                      + (f" with {sorted(rendered)}" if isinstance(rendered, Mapping) else ""))


class SandboxSolver:
    """The solver of a code recipe: the rendered program's `run(task_input)`, called in a fresh sandbox run.

    Args:
        sandbox: where to run (default: `Sandbox()`, default limits, no network).
        entry: the function the program defines.
        member: in a library run, the id of the member holding the program.
        files: helper modules the program may import (written beside it).
    State: the latest sandbox error of each (program, task) pair, bounded (`errors`).
    """

    def __init__(self, sandbox: Sandbox | None = None, *, entry: str = "run", member: str | None = None,
                 files: Mapping[str, str] | None = None) -> None:
        self.sandbox = sandbox or Sandbox()
        self.entry, self.member, self.files = entry, member, dict(files or {})
        self.errors: OrderedDict[str, str] = OrderedDict()  # "<program hash> <task id>" -> the error

    async def __call__(self, rendered: Any, task: Task) -> str:
        code = code_of(rendered, self.member)
        answer = await self.call(code, task_input(task))
        key = f"{content_hash(code)} {task.id}"
        if not isinstance(answer, Crash):
            self.errors.pop(key, None)
            return answer
        self.errors[key] = answer.error
        while len(self.errors) > ERRORS_KEPT:
            self.errors.popitem(last=False)
        return answer

    async def call(self, code: str, text: str) -> str:
        """`run(text)` of `code` in the sandbox: its answer, or a `Crash`."""
        call = await SandboxedFunction(code, self.sandbox, entry=self.entry, files=self.files).acall(text)
        return call.output if call.output is not None else Crash(call.error or "the call failed")

    def error(self, code: str, task_id: str) -> str | None:
        """The sandbox error of `code` on `task_id` (None: it answered, or it never ran there)."""
        return self.errors.get(f"{content_hash(code)} {task_id}")

    async def smoke(self, code: str, inputs: Sequence[str]) -> str | None:
        """The first error of `code` on `inputs` (None: it answered every one)."""
        for text in inputs:
            answer = await self.call(code, text)
            if isinstance(answer, Crash):
                return answer.error
        return None


@dataclass(frozen=True)
class Fitness:
    """A program's scores summarised as ADAS reports them: the mean and a 95% bootstrap interval of it."""

    mean: float
    low: float
    high: float
    n: int

    def describe(self) -> str:
        return (f"mean {100 * self.mean:.1f}% on {self.n} tasks, 95% bootstrap interval "
                f"({100 * self.low:.1f}%, {100 * self.high:.1f}%)")

    def to_list(self) -> list[float]:
        return [self.mean, self.low, self.high, float(self.n)]

    @classmethod
    def from_list(cls, data: Sequence[float]) -> Fitness:
        mean, low, high, n = data
        return cls(float(mean), float(low), float(high), int(n))


def fitness(scores: Sequence[float], *, resamples: int = 500) -> Fitness | None:
    """The bootstrap fitness of `scores` (seeded by the scores themselves, so it is reproducible); None if empty."""
    values = [float(s) for s in scores]
    if not values:
        return None
    rng = random.Random(content_hash(json.dumps(values)))
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(resamples))
    return Fitness(statistics.fmean(values), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1],
                   len(values))


@dataclass(frozen=True)
class Case:
    """A failed example as a prompt shows it: the input, the program's answer or error, the expected answer."""

    task_id: str
    input: str
    output: str
    expected: str

    def show(self) -> str:
        return f"input: {clip(self.input)}\nanswer: {clip(self.output)}\nexpected: {clip(self.expected)}"


def clip(text: str, limit: int = CLIP) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def load_prompt(name: str) -> Template:
    """Prompt `name` of algorithms/prompts/, as a `string.Template` (``$field`` placeholders)."""
    return Template((resources.files("agentgrad.algorithms") / "prompts" / f"{name}.md").read_text(encoding="utf-8"))


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.cost + b.cost)


class CodeAgent(RecipeAgent):
    """A recipe agent whose artifact is a program run by a `SandboxSolver`: crashes score 0, failures are shown
    with their sandbox errors, and each proposed program is tied to the verdict on it (`decided`).

    Args:
        solver: the sandbox solver (or any solver; errors are then not shown).
        reflector, seed, params: as `RecipeAgent`.
    State: the trace log, the drafts awaiting a verdict, the diff ids of proposals, the sandbox errors.
    """

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        self.tasks: dict[str, Task] = {}
        self.drafts: dict[str, dict[str, Any]] = {}  # program hash -> what the method knows of it
        self.diffs: dict[str, str] = {}  # diff id -> program hash
        self.member = solver.member if isinstance(solver, SandboxSolver) else None

    async def run(self, rendered: Any, task: Task) -> Any:
        self.tasks[task.id] = task
        return await super().run(rendered, task)

    def reward(self, score: Reward) -> Reward:
        """`score`, except that a crashed call scores 0."""
        return super().reward(lambda task, output: 0.0 if isinstance(output, Crash) else score(task, output))

    async def converse(self, messages: Sequence[Message], *, extra: Mapping[str, Any] | None = None) -> Reply:
        """One reflector call on a whole conversation (the base's `ask` takes one prompt); `extra`: parameters of
        this call only (a ``response_format``)."""
        if self.reflector is None:
            raise ConfigError(f"{self.name}: this recipe needs a reflector model (reflector= or model=)")
        self.asked += 1
        completion = await self.reflector.complete(list(messages), **{**self.params, **(extra or {})})
        return Reply(completion.text, completion.usage)

    def code(self, rendered: Any) -> str:
        return code_of(rendered, self.member)

    def failures(self, code: str, first: Task | None, limit: int) -> list[Case]:
        """Up to `limit` failed examples of `code` from the trace log (`first` first), with sandbox errors."""
        traces = {t.task_id: t.output for t in self.log.traces(code) if t.score is not None and t.score < 1.0}
        if first is not None:
            traces = {first.id: traces.get(first.id, ""), **traces}
            self.tasks.setdefault(first.id, first)
        cases: list[Case] = []
        for task_id, output in traces.items():
            task = self.tasks.get(task_id)
            if task is None or len(cases) >= limit:
                continue
            error = self.solver.error(code, task_id) if isinstance(self.solver, SandboxSolver) else None
            shown = f"(crashed: {error})" if error is not None else output or "(empty)"
            cases.append(Case(task_id, task_input(task), shown, str(task.expected)))
        return cases

    def compiled(self, code: str) -> bool:
        """True if `code` answered at least one example without crashing."""
        if not isinstance(self.solver, SandboxSolver):
            return bool(self.log.traces(code))
        solver = self.solver
        return any(solver.error(code, t.task_id) is None for t in self.log.traces(code))

    def draft(self, code: str, about: Mapping[str, Any]) -> Any:
        """Note a program about to be proposed, with what the method knows of it; the proposal to return (the
        program, or for a library run the program under its member's id)."""
        self.drafts[content_hash(code)] = {"code": code, **about}
        while len(self.drafts) > DRAFTS_KEPT:
            self.drafts.pop(next(iter(self.drafts)))
        return code if self.member is None else {self.member: code}

    def proposed(self, diff: Mapping[str, Any]) -> str | None:
        """The program a whole-text diff (a `Diff.to_dict`) puts in place, if it replaces the program."""
        new = [op.get("new") for op in diff.get("ops", ()) if op.get("member") == self.member]
        return str(new[-1]) if new and new[-1] is not None else None

    def repair(self, diff: Mapping[str, Any], head_text: str) -> Any:
        """A stale proposal on the current head: the same program (it was built from the archive, not the head)."""
        code = self.proposed(diff)
        if code is None:
            raise InvalidProposalError(f"{self.name}: the stale diff replaces no program")
        return code if self.member is None else {self.member: code}

    def decided(self, kind: str, payload: Mapping[str, Any]) -> tuple[dict[str, Any], str] | None:
        """For a final verdict on a drafted program: the draft and the outcome (the draft is then forgotten)."""
        if kind == "proposal":
            code = self.proposed(payload["diff"])
            if code is not None and content_hash(code) in self.drafts:
                self.diffs[str(payload["diff"]["id"])] = content_hash(code)
            return None
        outcome = Outcome(payload["outcome"]) if kind == "decision" else None
        if outcome is None or not outcome.final:
            return None
        key = self.diffs.pop(str(payload["diff_id"]), None)
        if key is None or outcome is Outcome.STALE:  # a stale proposal comes back repaired, under a new id
            return None
        draft = self.drafts.pop(key, None)
        return None if draft is None else (draft, outcome.value)

    def state_dict(self) -> dict[str, Any]:
        errors = dict(self.solver.errors) if isinstance(self.solver, SandboxSolver) else {}
        return {**super().state_dict(), "drafts": self.drafts, "diffs": self.diffs, "errors": errors}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        super().load_state_dict(data)
        drafts, diffs, errors = data.get("drafts"), data.get("diffs"), data.get("errors")
        if not (isinstance(drafts, Mapping) and isinstance(diffs, Mapping) and isinstance(errors, Mapping)):
            raise StateDictError(f"{self.name}: 'drafts', 'diffs' and 'errors' must be dicts")
        self.drafts = {str(k): dict(v) for k, v in drafts.items()}
        self.diffs = {str(k): str(v) for k, v in diffs.items()}
        if isinstance(self.solver, SandboxSolver):
            self.solver.errors = OrderedDict((str(k), str(v)) for k, v in errors.items())

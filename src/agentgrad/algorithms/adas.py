"""ADAS (Hu, Lu & Clune, "Automated Design of Agentic Systems", 2024): Meta Agent Search on the engine.

Agents are programs. An archive holds every agent found so far with its fitness; each generation a meta agent reads
the whole archive, writes a new agent as code (a JSON answer with "thought", "name" and "code"), reflects on it
twice (novelty and mistakes, then a check against the known pitfalls), and, when the code crashes in the sandbox,
is shown the error and debugs it (up to `debug_max` times). The new agent is evaluated and added to the archive,
better or not. Here the engine evaluates it: the agent is a whole-text replacement of the head (`WholeText`), the
gate scores it on validation tasks, the acceptance test decides whether it becomes the head, and the archive keeps
it with the fitness it showed either way. `docs/concepts/algorithms/adas.md` says what follows the paper.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgrad.algorithms.adas_code import (
    CodeAgent,
    Fitness,
    SandboxSolver,
    add_usage,
    clip,
    fitness,
    load_prompt,
    task_input,
)
from agentgrad.algorithms.base import Callback, Recipe, Reply, Reward, Solver, fenced, resolve
from agentgrad.algorithms.formats import asked, json_format, text_field
from agentgrad.core.artifact import Artifact, Kind, content_hash
from agentgrad.core.library import Library
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.optim.trust_region import TrustRegion
from agentgrad.providers.base import Message, Provider, Usage
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.sandbox import Sandbox
from agentgrad.strategies.whole import WholeText

START = "def run(task_input: str) -> str:\n    return task_input.strip()\n"
TASK = ("The agents answer the tasks of this run: each gets one task's input and must return the expected answer. "
        "The failures below show real inputs with the answers expected.")
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_FIELDS = ("name", "thought", "code", "fitness", "generation", "outcome")


def with_entry(code: str, entry: str = "run") -> str:
    """`code`, with ``run = <f>`` added when it defines no `entry` but exactly one top-level function `f` (ADAS
    takes the one function a reply defines, whatever its name)."""
    if re.search(rf"^def {entry}\(", code, re.MULTILINE):
        return code
    functions = re.findall(r"^def (\w+)\(", code, re.MULTILINE)
    return code if len(functions) != 1 else f"{code.rstrip()}\n\n{entry} = {functions[0]}\n"


_AGENT = {"thought": text_field(400), "name": text_field(60), "code": text_field(2400)}
#: The meta agent's reply in each turn (ADAS's response formats): a draft, a reflection, a debugging round.
DRAFT_FORMAT = json_format("adas_agent", _AGENT)
REFLECT_FORMAT = json_format("adas_reflection", {"reflection": text_field(400), **_AGENT})
DEBUG_FORMAT = json_format("adas_debug", {"debug_thought": text_field(400), **_AGENT})


def parse_agent(reply: str) -> dict[str, str]:
    """The agent in a meta-agent reply: its JSON object ("thought", "name", "code"), or a fenced module."""
    text = reply.strip()
    for candidate in (fenced(text), *_OBJECT.findall(text)):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("code"), str) and data["code"].strip():
            return {"thought": str(data.get("thought", "")), "name": str(data.get("name", "agent")),
                    "code": with_entry(data["code"].strip() + "\n")}
    if "def " in fenced(text):
        return {"thought": "", "name": "agent", "code": with_entry(fenced(text) + "\n")}
    raise InvalidProposalError("the meta agent's reply holds no agent: no JSON object with a 'code' field, and no "
                               "fenced module")


class ADASAgent(CodeAgent):
    """Meta Agent Search: an archive of agents (code and fitness), read whole by a meta agent that writes the next.

    Args:
        solver, reflector, seed, params: as `CodeAgent` (the reflector is the meta agent).
        reflections: self-reflection rounds after each draft (ADAS: 2).
        debug_max: rounds of debugging a draft that crashes in the sandbox (ADAS: 3); still crashing, it is dropped.
        examples: failed examples of the head shown to the meta agent.
        shown: the most archive entries in a prompt (the best half and the latest half when there are more).
        task: what the agents do, for the meta agent.
        json_mode: ask for each reply through the model's structured output (a ``json_schema`` of the turn's
            fields, strings bounded in length: `DRAFT_FORMAT`, `REFLECT_FORMAT`, `DEBUG_FORMAT`), as the released
            code asks for a JSON object (``response_format={"type": "json_object"}``) on every meta-agent call; a
            small model then writes an object the parser reads within a small token limit. Off by default: not
            every provider takes ``response_format`` (Anthropic's does not).
    State: the archive (name, thought, code, fitness, generation, outcome of each agent), the generation count and
    the `CodeAgent` state.
    """

    name = "adas"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, reflections: int = 2, debug_max: int = 3,
                 examples: int = 3, shown: int = 20, task: str = TASK, json_mode: bool = False) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        if min(reflections, debug_max) < 0 or min(examples, shown) < 1:
            raise ConfigError("adas: reflections and debug_max must be >= 0, examples and shown >= 1")
        self.reflections, self.debug_max, self.examples, self.shown_max = reflections, debug_max, examples, shown
        self.task, self.json_mode = task, json_mode
        self.archive: list[dict[str, Any]] = []
        self.generation = 0

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """One generation: draft from the archive, reflect, debug in the sandbox; the new agent's whole code."""
        head = self.code(rendered)
        self.enter(head, {"name": "initial agent" if not self.archive else "current best", "thought": "",
                          "generation": self.generation, "outcome": "head"})
        self.refresh()
        messages = [Message("system", load_prompt("adas_system").template),
                    Message("user", load_prompt("adas_meta").substitute(
                        task=self.task, archive=self.archive_text(), failures=self.failures_text(head, task)))]
        reply = await self.converse(messages, extra=asked(DRAFT_FORMAT, self.json_mode))
        usage, text = reply.usage, str(reply.text)
        for round_ in range(self.reflections):
            messages += [Message("assistant", text), Message("user", self.reflection(round_))]
            reply = await self.converse(messages, extra=asked(REFLECT_FORMAT, self.json_mode))
            usage, text = add_usage(usage, reply.usage), str(reply.text)
        agent, usage = await self.debugged(messages, text, usage, self.smoke_inputs(task))
        self.generation += 1
        return Reply(self.draft(agent["code"], {"name": agent["name"], "thought": agent["thought"],
                                                "generation": self.generation}), usage)

    def reflection(self, round_: int) -> str:
        """The prompt of reflection round `round_` (the first names the agent tried last, as ADAS does)."""
        if round_ % 2:
            return load_prompt("adas_reflect_2").template
        last = self.archive[-1] if self.generation > 0 and self.archive else None
        previous = "" if last is None else "The agent you tried last:\n" + json.dumps(self.shown(last)) + "\n\n"
        return load_prompt("adas_reflect_1").substitute(previous=previous)

    async def debugged(self, messages: list[Message], text: str, usage: Usage,
                       inputs: Sequence[str]) -> tuple[dict[str, str], Usage]:
        """The drafted agent once it runs in the sandbox on `inputs`, debugged with the meta agent if it crashes."""
        agent = parse_agent(text)
        if not isinstance(self.solver, SandboxSolver):
            return agent, usage
        for attempt in range(self.debug_max + 1):
            error = await self.solver.smoke(agent["code"], inputs)
            if error is None:
                return agent, usage
            if attempt == self.debug_max:
                break
            messages += [Message("assistant", text),
                         Message("user", load_prompt("adas_debug").substitute(error=clip(error)))]
            reply = await self.converse(messages, extra=asked(DEBUG_FORMAT, self.json_mode))
            usage, text = add_usage(usage, reply.usage), str(reply.text)
            agent = parse_agent(text)
        raise InvalidProposalError(f"adas: the agent still crashes after {self.debug_max} rounds of debugging: "
                                   f"{clip(error or '', 200)}")

    def smoke_inputs(self, task: Task) -> list[str]:
        """The inputs a draft must run on before it is proposed: the failed task's and two others seen."""
        others = [t for t in self.tasks.values() if t.id != task.id][:2]
        return [task_input(t) for t in (task, *others)]

    def failures_text(self, head: str, task: Task) -> str:
        cases = self.failures(head, task, self.examples)
        return "\n\n".join(f"## Failure {i}\n{c.show()}" for i, c in enumerate(cases, 1)) or "(none recorded yet)"

    def enter(self, code: str, about: Mapping[str, Any]) -> None:
        """Put `code` in the archive unless it is there, with its fitness so far."""
        if any(content_hash(e["code"]) == content_hash(code) for e in self.archive):
            return
        score = fitness(list(self.log.scores(code).values()))
        self.archive.append({**about, "code": code, "fitness": None if score is None else score.to_list()})

    def refresh(self) -> None:
        """Each entry's fitness from every score of its code the trace log holds (it grows as the run goes)."""
        for entry in self.archive:
            scores = list(self.log.scores(entry["code"]).values())
            known = entry["fitness"]
            if scores and (known is None or len(scores) >= int(known[3])):
                entry["fitness"] = (fitness(scores) or Fitness(0.0, 0.0, 0.0, 0)).to_list()

    def shown(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        score = entry["fitness"]
        described = "not evaluated" if score is None else Fitness.from_list(score).describe()
        return {"name": entry["name"], "thought": clip(entry["thought"], 800), "code": entry["code"],
                "fitness": described, "generation": entry["generation"]}

    def archive_text(self) -> str:
        """The archive as the meta agent reads it: a JSON list, in the order found (`shown_max` entries at most)."""
        entries = list(range(len(self.archive)))
        if len(entries) > self.shown_max:
            best = sorted(entries, key=lambda i: -(self.archive[i]["fitness"] or [0.0])[0])[:self.shown_max // 2]
            latest = entries[-(self.shown_max - len(best)):]
            entries = sorted(set(best) | set(latest))
        return "[\n" + ",\n".join(json.dumps(self.shown(self.archive[i])) for i in entries) + "\n]"

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """A final verdict on a drafted agent adds it to the archive with the fitness it showed (if it ran)."""
        decided = self.decided(kind, payload)
        if decided is None:
            return
        draft, outcome = decided
        if self.log.scores(draft["code"]):
            self.enter(draft["code"], {k: draft[k] for k in ("name", "thought", "generation")} | {"outcome": outcome})

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "archive": [dict(e) for e in self.archive], "generation": self.generation}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        archive = data.get("archive")
        if not isinstance(archive, list) or not all(isinstance(e, Mapping) and set(_FIELDS) <= set(e)
                                                    for e in archive):
            raise StateDictError(f"adas: 'archive' must be a list of entries with {list(_FIELDS)}")
        super().load_state_dict(data)
        self.archive = [{k: e[k] for k in _FIELDS} for e in archive]
        self.generation = int(data.get("generation", 0))


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, sandbox: Sandbox | None = None,
           member: str | None = None, files: Mapping[str, str] | None = None, reflections: int = 2,
           debug_max: int = 3, examples: int = 3, shown: int = 20, eval_tasks: int = 24, task: str = TASK,
           params: Mapping[str, Any] | None = None, max_chars: int = 20000, timeout: float = 600.0,
           json_mode: bool = False) -> Recipe:
    """ADAS on the engine: `ADASAgent`, whole-program proposals, and a gate that evaluates each new agent on a fixed
    sample of `eval_tasks` validation tasks (no screen, no early stop: every agent gets a full fitness, as in ADAS);
    one generation per round in the synchronous runtime."""
    solver = run or SandboxSolver(sandbox, member=member, files=files)
    if isinstance(solver, SandboxSolver):
        solver.sandbox.isolation.require(network=solver.sandbox.network)  # refuse now, not on every call
    solver, writer = resolve(solver, model, reflector)
    agent = ADASAgent(solver, writer, seed=seed, params=params, reflections=reflections, debug_max=debug_max,
                      examples=examples, shown=shown, task=task, json_mode=json_mode)
    gate = GateConfig(screen=False, early_stop=False, futility=0.0, focus=0, max_examples=eval_tasks, pool="val",
                      chunk=max(1, eval_tasks))
    config = RunConfig(workers=Workers(rollout=1, propose=1, gate=1), gate=gate, acceptance=Acceptance(looks=1),
                       staleness=Staleness(policy=StalePolicy.REPAIR, repair=agent.repair),
                       trust_region=TrustRegion(max_ops=1, max_chars=2 * max_chars), asynchronous=False, seed=seed,
                       timeout=timeout)
    return Recipe("adas", agent, WholeText(max_chars=max_chars), config, Budget(calls=300))


def adas(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
         model: str | Provider | None = None, reflector: str | Provider | None = None,
         artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
         budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
         store: str | Path | None = None, seed: int = 0, callbacks: Sequence[Callback] = (),
         **options: Any) -> Result:
    """Meta Agent Search on `tasks`: evolve the program `artifact` (default: a module whose `run` echoes its input)
    with the meta agent `reflector` (or `model`); `options` go to `recipe` (sandbox, reflections, debug_max, ...)."""
    start = Artifact("agent", Kind.HARNESS, artifact if isinstance(artifact, str) else START) \
        if artifact is None or isinstance(artifact, str) else artifact
    return recipe(run=run, model=model, reflector=reflector, seed=seed, **options).evolve(
        tasks, reward, artifact=start, budget=budget, asynchronous=asynchronous, workers=workers, store=store,
        seed=seed, callbacks=callbacks)

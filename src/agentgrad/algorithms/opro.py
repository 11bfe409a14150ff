"""OPRO (Yang et al., 2023, "Large Language Models as Optimizers") as a recipe on the engine.

The optimizer model reads a meta-prompt holding the scored history of earlier instructions, sorted ascending by
score (so the best comes last), and a few task exemplars with their expected answers, and writes a new
instruction. Several candidates per step (one meta-prompt sample per failed rollout: a synchronous round of
`candidates` workers is one OPRO step); each is a whole-text replacement (`WholeText`), and the engine's gate
scores it against the head. Every candidate the gate scored joins the history with its score, accepted or not:
the history, not the head, is what the next meta-prompt builds on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from agentgrad.algorithms.base import Callback, Recipe, RecipeAgent, Reply, Reward, Solver, fenced, resolve
from agentgrad.core.artifact import Artifact
from agentgrad.core.library import Library
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, StateDictError
from agentgrad.providers.base import Provider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.result import Result
from agentgrad.strategies.whole import WholeText

_INS = re.compile(r"<INS>(.*?)</INS>", re.DOTALL)
MEMORY = 256  # the most scored instructions remembered (the best kept)


def prompt_template(name: str) -> Template:
    """The recipe prompt `name` (a file of ``algorithms/prompts``)."""
    return Template(resources.files("agentgrad.algorithms").joinpath(f"prompts/{name}.md").read_text("utf-8"))


def instruction_of(reply: str) -> str:
    """The new instruction in an optimizer reply: the last <INS>...</INS> block, else its last ``` block or all."""
    found = _INS.findall(reply)
    return (found[-1] if found else fenced(reply)).strip()


@dataclass(frozen=True)
class Exemplar:
    """A training task the instruction got wrong: its input, its expected answer, and how often it failed."""

    input: str
    expected: str
    misses: int = 1


class OproAgent(RecipeAgent):
    """OPRO's optimizer: a meta-prompt of scored instructions (ascending) and exemplars, one candidate per call.

    Args:
        solver, reflector, seed, params: see `RecipeAgent` (the reflector samples at temperature 1.0 unless
            `params` says otherwise, as in the paper).
        history: the most instructions the meta-prompt shows (the best ones; 20 in the paper).
        threshold: instructions scoring below this are left out of the meta-prompt (0.0-0.3 in the code).
        exemplars: task exemplars per meta-prompt (3 in the code).
        buckets: scores are shown as integers in [0, buckets] (100 in the code).
    State: the scored instructions, the candidates awaiting a verdict and the exemplar pool (`state_dict`).
    """

    name = "opro"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, history: int = 20, threshold: float = 0.0,
                 exemplars: int = 3, buckets: int = 100) -> None:
        super().__init__(solver, reflector, seed=seed, params={"temperature": 1.0, **(params or {})})
        if history < 1 or exemplars < 1 or buckets < 1:
            raise ConfigError("opro: history, exemplars and buckets must be >= 1")
        self.history, self.threshold, self.shots, self.buckets = history, threshold, exemplars, buckets
        self.scores: dict[str, float] = {}  # instruction -> mean reward on the tasks it was scored on
        self.pending: dict[str, str] = {}  # diff id -> the candidate instruction
        self.pool: dict[str, Exemplar] = {}  # training task id -> a task some instruction got wrong
        self.template = prompt_template("opro_meta")

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """One sample of the meta-prompt: a new whole instruction."""
        if not isinstance(rendered, str):
            raise ConfigError("opro evolves one artifact (a text); a library of artifacts is not supported")
        self._miss(task)
        self._score(rendered)
        reply = await self.ask(self.meta_prompt(task))
        return Reply(instruction_of(str(reply.text)), reply.usage)

    def meta_prompt(self, task: Task) -> str:
        """The meta-prompt: the scored history (ascending) and exemplars led by `task`."""
        return self.template.substitute(history=self._history_block(), exemplars=self._exemplar_block(task))

    def ranked(self) -> list[tuple[str, float]]:
        """The instructions the meta-prompt shows: the best `history` at or above the threshold, ascending."""
        for text in list(self.scores):
            self._score(text)
        kept = [(t, s) for t, s in self.scores.items() if s >= self.threshold]
        return sorted(kept, key=lambda item: (item[1], item[0]))[-self.history:]

    def _history_block(self) -> str:
        entries = [f"<INS>\n{text}\n</INS>\nscore: {round(score * self.buckets)}" for text, score in self.ranked()]
        return "\n\n".join(entries) or "(no instruction has been scored yet)"

    def _exemplar_block(self, task: Task) -> str:
        others = sorted(k for k in self.pool if k != task.id)
        picked = [self.pool[k] for k in self.rng.sample(others, min(len(others), self.shots - 1))]
        shown = [Exemplar(str(task.input), str(task.expected)), *picked]
        return "\n\n".join(f"input:\n{e.input}\nexpected answer:\n{e.expected}" for e in shown)

    def _miss(self, task: Task) -> None:
        seen = self.pool.get(task.id)
        self.pool[task.id] = Exemplar(str(task.input), str(task.expected), 1 + (seen.misses if seen else 0))

    def _score(self, text: str) -> None:
        known = self.log.scores(text)
        if known:
            self.scores[text] = sum(known.values()) / len(known)
        if len(self.scores) > MEMORY:
            worst = min(self.scores, key=lambda t: self.scores[t])
            del self.scores[worst]

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """A proposed candidate is remembered; once judged, it joins the history with its score."""
        if kind == "proposal":
            ops = payload["diff"]["ops"]
            if len(ops) == 1 and ops[0].get("new") is not None:
                self.pending[str(payload["diff"]["id"])] = str(ops[0]["new"])
        elif kind == "decision":
            text = self.pending.pop(str(payload["diff_id"]), None)
            if text is not None:
                self._score(text)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "scores": dict(self.scores), "pending": dict(self.pending),
                "pool": {k: [e.input, e.expected, e.misses] for k, e in self.pool.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        super().load_state_dict(data)
        try:
            scores = {str(k): float(v) for k, v in data["scores"].items()}
            pending = {str(k): str(v) for k, v in data["pending"].items()}
            pool = {str(k): Exemplar(str(i), str(e), int(m)) for k, (i, e, m) in data["pool"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDictError(f"opro: malformed state ({exc})") from exc
        self.scores, self.pending, self.pool = scores, pending, pool


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, candidates: int = 8, history: int = 20,
           threshold: float = 0.0, exemplars: int = 3, params: Mapping[str, Any] | None = None,
           solve_params: Mapping[str, Any] | None = None) -> Recipe:
    """OPRO on the engine: `candidates` meta-prompt samples per synchronous round, each a whole-text candidate.
    `params` go to the optimizer model's calls, `solve_params` to the model's solving calls (with `model=`)."""
    if candidates < 1:
        raise ConfigError(f"opro: candidates must be >= 1, got {candidates}")
    solver, writer = resolve(run, model, reflector, solve_params=solve_params)
    agent = OproAgent(solver, writer, seed=seed, params=params, history=history, threshold=threshold,
                      exemplars=exemplars)
    workers = Workers(rollout=candidates, propose=candidates, gate=max(1, candidates // 2))
    config = RunConfig(workers=workers, asynchronous=False, seed=seed, max_batch=candidates)
    return Recipe("opro", agent, WholeText(), config, Budget(calls=300))


def opro(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
         model: str | Provider | None = None, reflector: str | Provider | None = None,
         artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
         budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
         store: str | Path | None = None, seed: int = 0, candidates: int = 8, history: int = 20,
         threshold: float = 0.0, exemplars: int = 3, params: Mapping[str, Any] | None = None,
         solve_params: Mapping[str, Any] | None = None, callbacks: Sequence[Callback] = ()) -> Result:
    """Run OPRO: see `recipe` for the options and `docs/concepts/algorithms/opro.md` for the fidelity note."""
    return recipe(run=run, model=model, reflector=reflector, seed=seed, candidates=candidates, history=history,
                  threshold=threshold, exemplars=exemplars, params=params, solve_params=solve_params).evolve(
        tasks, reward, artifact=artifact, budget=budget, asynchronous=asynchronous, workers=workers, store=store,
        seed=seed, callbacks=callbacks)

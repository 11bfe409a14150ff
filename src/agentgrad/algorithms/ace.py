"""ACE (Agentic Context Engineering, Zhang et al. 2025) as a recipe: a playbook of itemised bullets grown by delta
updates from a reflector and a curator.

Each failed rollout gives one ACE step. The reflector (one call) diagnoses the failure and tags the bullets that
bore on it helpful, harmful or neutral, and the bullets' counters change at once. The curator (a second call) sees
the playbook with its counters and the reflection and names the bullets to add (ADD operations, as in the
released code). The agent then grows and refines deterministically: it gives new bullets fresh ids, drops
additions that repeat a bullet (de-duplication), deletes bullets the counters show harmful and, when the playbook
would outgrow its token budget, the least useful ones. The delta is a `KeyedRules` proposal (bullet id to
content, None deletes), so it edits only the bullets it names. The engine's verdict is feedback too: the tasks an
accepted delta won and lost are added to its bullets' helpful and harmful counters.

The proposal always builds on the head: ACE is sequential, and the head is the best playbook the acceptance
test has let through (the released code's ``best_playbook``). Offline mode runs `epochs` passes over the training
tasks; online mode one pass, one task at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from agentgrad.algorithms.ace_playbook import (
    SECTIONS,
    TAGS,
    Bullet,
    Counters,
    bullets,
    duplicates,
    fresh,
    harmful,
    json_object,
    over_budget,
    section_slug,
    shown,
    stats,
)
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
from agentgrad.algorithms.formats import asked, json_format, text_field
from agentgrad.core.artifact import Artifact
from agentgrad.core.library import Library
from agentgrad.core.units import Scope, unit_key
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.optim.trust_region import TrustRegion
from agentgrad.providers.base import Provider, Usage
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.result import Result
from agentgrad.strategies.keyed import KeyedRules, split_entry

MODES = ("offline", "online")
_PENDING = ("recheck", "full_check", "deferred", "extend", "fused")  # verdicts after which a delta is still open


def prompt(name: str) -> str:
    """The text of ``prompts/ace_<name>.md``."""
    return (resources.files("agentgrad.algorithms") / "prompts" / f"ace_{name}.md").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Reflection:
    """What the reflector said: its diagnosis as text for the curator, and its tags as (bullet id, tag) pairs."""

    text: str
    tags: tuple[tuple[str, str], ...]


def parse_reflection(reply: str) -> Reflection:
    """The reflector's JSON reply: the diagnosis fields and the bullet tags (unknown tags are dropped)."""
    data = json_object(reply, "reflector")
    fields = ("error_identification", "root_cause_analysis", "correct_approach", "key_insight")
    text = "\n".join(f"{name.replace('_', ' ')}: {data[name]}" for name in fields if data.get(name))
    if not text:
        raise InvalidProposalError(f"ace: the reflector's reply has none of {list(fields)}")
    tags = []
    for item in data.get("bullet_tags") or []:
        if isinstance(item, Mapping):
            bullet_id, tag = str(item.get("id") or item.get("bullet") or ""), str(item.get("tag", "")).lower()
            if bullet_id and tag in TAGS:
                tags.append((bullet_id, tag))
    return Reflection(text, tuple(tags))


def parse_additions(reply: str) -> list[tuple[str, str]]:
    """The curator's ADD operations as (section, content) pairs; other operation types are not applied (as in the
    released code)."""
    operations = json_object(reply, "curator").get("operations")
    if not isinstance(operations, list):
        raise InvalidProposalError("ace: the curator's reply has no 'operations' list")
    additions = []
    for op in operations:
        if isinstance(op, Mapping) and str(op.get("type", "")).upper() == "ADD":
            content = " ".join(str(op.get("content") or "").split())
            if content:
                additions.append((str(op.get("section") or "others"), content))
    return additions


REFLECTOR_FORMAT = json_format("ace_reflection", {
    "reasoning": text_field(300),
    **{name: text_field(150) for name in ("error_identification", "root_cause_analysis", "correct_approach",
                                     "key_insight")},
    "bullet_tags": {"type": "array", "maxItems": 8, "items": {
        "type": "object", "properties": {"id": text_field(40), "tag": {"type": "string", "enum": list(TAGS)}},
        "required": ["id", "tag"], "additionalProperties": False}}})
CURATOR_FORMAT = json_format("ace_curation", {
    "reasoning": text_field(300),
    "operations": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"type": {"type": "string", "enum": ["ADD"]}, "section": text_field(40),
                                         "content": text_field(200)},
        "required": ["type", "section", "content"], "additionalProperties": False}}})


def _sum(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens, a.cost + b.cost)


class AceAgent(RecipeAgent):
    """ACE's reflector and curator over a playbook, with the bullets' counters.

    Args:
        solver, reflector, seed, params: see `RecipeAgent` (the reflector model plays reflector and curator).
        ground_truth: show the reflector the expected answer (False: ACE without labels, feedback only).
        dedup: an addition at least this alike (`ace_playbook.similarity`) to a bullet is a duplicate.
        token_budget: the most tokens the playbook may hold; beyond it the least useful bullets are deleted.
        prune_at: a bullet tagged harmful this many times, and more often than helpful, is deleted.
        samples: the number of steps the run is expected to take (shown to the curator as progress).
        member: in a run over a library, the id of the playbook artifact.
        json_mode: ask the reflector and the curator for their JSON through the model's structured output (a
            ``json_schema`` ``response_format`` naming every field, each string bounded in length), as the
            released code's ``--json_mode`` asks for a JSON object; a small model then can neither stop before the
            curator's operations nor run past a small token limit. Needs a model that takes ``response_format``
            (OpenAI-compatible servers, llama.cpp, the local model).
    State: the counters, the next bullet number, the step count and the deltas awaiting a verdict (`state_dict`).
    """

    name = "ace"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, ground_truth: bool = True, dedup: float = 0.9,
                 token_budget: int = 80_000, prune_at: int = 2, samples: int | None = None,
                 member: str = "playbook", json_mode: bool = False) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        self.json_mode = json_mode
        if not 0.0 < dedup <= 1.0 or token_budget < 1 or prune_at < 1:
            raise ConfigError(f"ace: needs 0 < dedup <= 1, token_budget >= 1 and prune_at >= 1; got {dedup}, "
                              f"{token_budget}, {prune_at}")
        self.ground_truth, self.dedup, self.token_budget, self.prune_at = ground_truth, dedup, token_budget, prune_at
        self.samples, self.member = samples, member
        self.counters = Counters()
        self.next_id, self.steps = 1, 0
        self.pending: dict[str, dict[str, str]] = {}  # open deltas (by diff id, or "task:<id>" until logged)
        self.run_dir: Path | None = None
        self.reflector_prompt, self.curator_prompt = Template(prompt("reflector")), Template(prompt("curator"))

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """One ACE step on a failed task: reflect and tag (the counters change), curate, grow and refine."""
        playbook = self._playbook(rendered)
        items = bullets(playbook)
        self.steps += 1
        first = await self.ask(self._reflect_prompt(task, output, reward, items),
                               extra=asked(REFLECTOR_FORMAT, self.json_mode))
        reflection = parse_reflection(str(first.text))
        known = {b.id for b in items}
        for bullet_id, tag in reflection.tags:
            if bullet_id in known:
                self.counters.tag(bullet_id, tag)
        second = await self.ask(self._curate_prompt(task, reflection, items),
                                extra=asked(CURATOR_FORMAT, self.json_mode))
        delta = self._delta(items, parse_additions(str(second.text)))
        self.pending[f"task:{task.id}"] = {k: v for k, v in delta.items() if v is not None}
        return Reply(delta if isinstance(rendered, str) else {self.member: delta}, _sum(first.usage, second.usage))

    def _playbook(self, rendered: Any) -> str:
        if isinstance(rendered, Mapping):
            if self.member not in rendered:
                raise ConfigError(f"ace: the library has no playbook artifact {self.member!r} (member=)")
            return str(rendered[self.member])
        return text_of(rendered)

    def _reflect_prompt(self, task: Task, output: Any, reward: float, items: Sequence[Bullet]) -> str:
        truth = (f"The expected answer is: {task.expected}" if self.ground_truth and task.expected is not None
                 else "Not available: judge from the feedback alone.")
        answer = "(the call failed: no answer)" if output is None else output_text(output)
        feedback = f"The answer scored {reward:.2f}, where a correct answer scores 1."
        return self.reflector_prompt.substitute(question=task.input, answer=answer, truth=truth, feedback=feedback,
                                                bullets=shown(items, self.counters))

    def _curate_prompt(self, task: Task, reflection: Reflection, items: Sequence[Bullet]) -> str:
        return self.curator_prompt.substitute(step=self.steps, total=self.samples or "?",
                                              token_budget=self.token_budget, stats=stats(items, self.counters),
                                              playbook=shown(items, self.counters), reflection=reflection.text,
                                              question=task.input, sections=", ".join(SECTIONS))

    def _delta(self, items: Sequence[Bullet], additions: Sequence[tuple[str, str]]) -> dict[str, str | None]:
        """Grow (new ids for fresh additions) and refine (duplicates, harmful bullets, the token budget)."""
        delta: dict[str, str | None] = {}
        numbers = [int(m.group(1)) for b in items if (m := re.search(r"-(\d+)$", b.id))]
        self.next_id = max([self.next_id, *(n + 1 for n in numbers)])
        open_ = [Bullet(k, v) for delta_ in self.pending.values() for k, v in delta_.items()]
        for section, content in fresh(additions, [*items, *open_], self.dedup):
            delta[f"{section_slug(section)}-{self.next_id:05d}"] = content
            self.next_id += 1
        grown = [*items, *(Bullet(k, v) for k, v in delta.items() if v is not None)]
        drop = duplicates(items, self.counters, self.dedup) + harmful(items, self.counters, self.prune_at)
        left = [b for b in grown if b.id not in drop]
        drop += over_budget(left, self.counters, self.token_budget, keep=list(delta))
        delta.update({bullet_id: None for bullet_id in dict.fromkeys(drop)})
        if not delta:
            raise InvalidProposalError("ace: the curator added nothing new and no bullet needs refining")
        return delta

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Track the open deltas; credit an accepted delta's bullets with the tasks it won and lost; write the
        agent's state to the run directory when the run finishes."""
        if kind == "proposal":
            self.pending.pop(f"task:{payload.get('task')}", None)
            ops = payload.get("diff", {}).get("ops", [])
            written = {unit_key(Scope.KEY, op["new"]): split_entry(op["new"]).value
                       for op in ops if op.get("new") and ":" in op["new"]}
            if written:
                self.pending[str(payload["diff"]["id"])] = written
        elif kind == "proposal_failed":
            self.pending.pop(f"task:{payload.get('task')}", None)
        elif kind == "decision" and payload.get("outcome") not in _PENDING:
            self._decided(payload)
        elif kind == "started":
            self.run_dir = Path(str(payload["run_dir"]))
        elif kind == "finished" and self.run_dir is not None:
            (self.run_dir / "ace_state.json").write_text(json.dumps(self.state_dict(), indent=1), encoding="utf-8")

    def _decided(self, payload: Mapping[str, Any]) -> None:
        numbers = payload.get("numbers") or {}
        diffs = (payload.get("diff_id"), *payload.get("parts", ()))
        ids = [bullet_id for d in diffs for bullet_id in self.pending.pop(str(d), {})]
        if payload.get("outcome") == "accepted":
            for bullet_id in ids:
                self.counters.credit(bullet_id, round(numbers.get("wins", 0)), round(numbers.get("losses", 0)))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "counters": self.counters.state_dict(), "next_id": self.next_id,
                "steps": self.steps, "pending": self.pending}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            next_id, steps, pending = int(data["next_id"]), int(data["steps"]), dict(data["pending"])
            counters = data["counters"]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDictError(f"ace: malformed recipe state ({exc})") from exc
        super().load_state_dict(data)
        self.counters.load_state_dict(counters)
        self.next_id, self.steps = next_id, steps
        self.pending = {str(k): {str(i): str(c) for i, c in v.items()} for k, v in pending.items()}


def generator(provider: Provider, params: Mapping[str, Any] | None = None) -> Solver:
    """ACE's generator on a model: the playbook inside the generator's instructions as the system prompt
    (`params`: of each answering call, e.g. max_tokens)."""
    from agentgrad.agents.llm import LLMAgent

    agent, template = LLMAgent(provider, params=dict(params or {})), Template(prompt("generator"))

    async def run(rendered: Any, task: Task) -> Any:
        return await agent.run(template.substitute(playbook=text_of(rendered) or "(empty)"), task)
    return run


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, mode: str = "offline", epochs: int = 5,
           samples: int | None = None, calls: int = 300, ground_truth: bool = True, dedup: float = 0.9,
           token_budget: int = 80_000, prune_at: int = 2, member: str = "playbook", json_mode: bool = False,
           params: Mapping[str, Any] | None = None) -> Recipe:
    """ACE on the engine: `AceAgent`, `KeyedRules` deltas, a trust region that keeps each delta small, and a
    budget of `epochs` passes over `samples` training tasks (offline) or one pass, one task at a time (online)."""
    if mode not in MODES or epochs < 1:
        raise ConfigError(f"ace: mode must be one of {MODES} and epochs >= 1, got {mode!r}, {epochs!r}")
    from agentgrad.agents.skill import resolve_model

    provider = resolve_model(model) if isinstance(model, str) else model
    solver, writer = resolve(run if run is not None or provider is None else generator(provider), provider, reflector)
    passes = epochs if mode == "offline" else 1
    agent = AceAgent(solver, writer, seed=seed, params=params, ground_truth=ground_truth, dedup=dedup,
                     token_budget=token_budget, prune_at=prune_at, member=member, json_mode=json_mode,
                     samples=None if samples is None else passes * samples)
    workers = Workers(rollout=1, propose=1, gate=2) if mode == "online" else Workers()
    config = RunConfig(workers=workers, trust_region=TrustRegion(max_ops=8, max_chars=2000), asynchronous=False,
                       seed=seed)
    budget = Budget(calls=calls, rollouts=None if samples is None else passes * samples)
    return Recipe("ace", agent, KeyedRules(), config, budget)


def ace(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
        model: str | Provider | None = None, reflector: str | Provider | None = None,
        artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None, budget: Budget | None = None,
        asynchronous: bool = False, workers: int | Workers | None = None, store: str | Path | None = None,
        seed: int = 0, callbacks: Sequence[Callback] = (), **options: Any) -> Result:
    """Evolve a playbook with ACE (options: those of `recipe`: mode, epochs, ground_truth, dedup, ...)."""
    splits = tasks if isinstance(tasks, Splits) else split(list(tasks), seed=seed)
    return recipe(run=run, model=model, reflector=reflector, seed=seed, samples=len(splits.train), **options).evolve(
        splits, reward, artifact=artifact, budget=budget, asynchronous=asynchronous, workers=workers, store=store,
        seed=seed, callbacks=callbacks)

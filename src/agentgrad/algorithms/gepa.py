"""GEPA on the engine: reflective mutation from minibatch traces, a per-example Pareto frontier, system-aware merge.

Each proposal (GEPA, Agrawal et al. 2025, and its released code):
1. draws a parent from the Pareto frontier of the candidates kept so far (`algorithms.pareto`): a candidate best
   on a single example keeps a chance of being built on;
2. shows the reflector the parent's instructions with a minibatch of its traces (input, answer and judgement;
   the failure at hand first, then the parent's other failures), and takes the new instructions from its reply's
   ``` block; in a library run the components are rewritten in turn (round robin), one per proposal;
3. every `merge_every`-th proposal in a library run instead merges two kept candidates that share an ancestor,
   taking each component from the side that changed it (the higher scorer when both did).
A candidate the gate scored joins the frontier when it beats every kept candidate on some task. The frontier
decides what proposals build on; the admission decides what the served head becomes:
- "published" (the default), as GEPA's released loop: the candidate is tried on a minibatch of `minibatch` training
  tasks (the one it was proposed for and others drawn per proposal) and goes on only if its sum there beats the
  head's; it is then scored on the whole validation split and served if its mean there is higher
  (`Acceptance(rule="mean")`). Fast on exact scores; no guard against answer noise.
- "engine": the engine's own gate (one screen task, a focused plan with early stopping, the sign test with its
  false-accept bound δ), for noisy agents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from agentgrad.algorithms.base import Callback, Recipe, RecipeAgent, Reply, Solver, fenced, resolve, text_of
from agentgrad.algorithms.pareto import sample_parent, wins_somewhere
from agentgrad.core._checks import integer, one_of
from agentgrad.core.artifact import Artifact, Kind, content_hash
from agentgrad.core.library import Library, is_packed, pack, unpack
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.providers.base import Provider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.strategies.whole import WholeText

PENDING_LIMIT = 256


def _prompt() -> str:
    return resources.files("agentgrad.algorithms").joinpath("prompts/gepa_reflect.md").read_text(encoding="utf-8")


class GEPAAgent(RecipeAgent):
    """GEPA's proposer. Args (besides `RecipeAgent`'s): `minibatch`, how many traces one reflection sees;
    `merge_every`, every how many proposals a library run merges two candidates (0: never); `members`, the
    library components it may rewrite (None: all). State: the kept candidates and their parents, the candidates
    proposed and not yet judged, the proposal count, the tasks seen."""

    name = "gepa"

    def __init__(self, solver: Solver, reflector: Provider | None, *, minibatch: int = 3, merge_every: int = 0,
                 members: Sequence[str] | None = None, seed: int = 0, params: Mapping[str, Any] | None = None,
                 template: str | None = None) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        integer(minibatch, "gepa: minibatch", low=1)
        integer(merge_every, "gepa: merge_every", low=0)
        self.minibatch, self.merge_every = minibatch, merge_every
        self.members = None if members is None else list(members)
        self.template = template or _prompt()
        self.kept: dict[str, str] = {}  # content hash -> text: the candidates on (or once on) the frontier
        self.parents: dict[str, str | None] = {}  # content hash -> its parent's
        self.pending: dict[str, str | None] = {}  # proposed, not yet judged: content hash -> parent's
        self.proposals = 0
        self.tasks: dict[str, Task] = {}

    async def run(self, rendered: Any, task: Task) -> Any:
        self.tasks.setdefault(task.id, task)
        return await super().run(rendered, task)

    # -- the frontier ------------------------------------------------------------------------------------------
    def table(self) -> dict[str, dict[str, float]]:
        """The known per-task scores of every kept candidate."""
        return {key: self.log.scores(text) for key, text in self.kept.items()}

    def keep(self, text: str, parent: str | None) -> str:
        key = content_hash(text)
        if key not in self.kept:
            self.kept[key], self.parents[key] = text, parent
        return key

    def settle(self) -> None:
        """Judge the proposed candidates the gate has scored: those that win somewhere join the frontier."""
        for key, parent in list(self.pending.items()):
            text = self.log.text(key)
            scores = {} if text is None else self.log.scores(text)
            if text is None or not scores:
                continue
            if wins_somewhere(scores, self.table()):
                self.keep(text, parent)
            del self.pending[key]
        while len(self.pending) > PENDING_LIMIT:
            del self.pending[next(iter(self.pending))]

    def parent(self, head: str) -> str:
        """A parent drawn from the frontier (the head while nothing is scored)."""
        head_key = self.keep(head, self.pending.pop(content_hash(head), None))
        self.settle()
        return sample_parent(self.table(), self.rng) or head_key

    # -- proposing ---------------------------------------------------------------------------------------------
    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply | None:
        head = text_of(rendered)
        parent = self.kept[self.parent(head)]
        self.proposals += 1
        if self.merge_every and self.proposals % self.merge_every == 0 and is_packed(head):
            merged = self.merge(head)
            if merged is not None:
                return merged
        failure = (task, "" if output is None else str(getattr(output, "text", output)), reward)
        examples = self.examples(parent, failure if parent == head else None)
        if not is_packed(parent):
            reply = await self.ask(self.template.format(instructions=parent, examples=examples))
            return self._proposal(head, parent, fenced(reply.text), None, reply)
        texts = unpack(parent)
        member = self._component(texts)
        reply = await self.ask(self.template.format(instructions=texts[member], examples=examples))
        return self._proposal(head, parent, fenced(reply.text), member, reply)

    def _component(self, texts: Mapping[str, str]) -> str:
        names = [m for m in sorted(texts) if self.members is None or m in self.members]
        if not names:
            raise ConfigError(f"gepa: none of the components {self.members} is in the library {sorted(texts)}")
        return names[self.proposals % len(names)]

    def _proposal(self, head: str, parent: str, new: str, member: str | None, reply: Reply) -> Reply:
        """The edit that turns the head into the candidate (the parent with `new` in place of `member`)."""
        if member is None:
            self.pending[content_hash(new)] = content_hash(parent)
            return Reply(new, reply.usage)
        candidate = {**unpack(parent), member: new}
        current = unpack(head)
        self.pending[content_hash(_packed_like(head, candidate))] = content_hash(parent)
        return Reply({m: t for m, t in candidate.items() if t != current.get(m)} or {member: new}, reply.usage)

    def examples(self, parent: str, failure: tuple[Task, str, float] | None) -> str:
        """The minibatch the reflector sees: the failure at hand first, then the parent's worst traces."""
        shown: list[tuple[Task, str, float]] = [failure] if failure is not None else []
        traces = sorted(self.log.traces(parent), key=lambda t: (t.score or 0.0, t.task_id))
        for trace in traces:
            if len(shown) >= self.minibatch:
                break
            task = self.tasks.get(trace.task_id)
            if task is not None and all(task.id != s[0].id for s in shown):
                shown.append((task, trace.output, trace.score or 0.0))
        return "\n\n".join(_example(i + 1, *item) for i, item in enumerate(shown)) or "(no examples yet)"

    def merge(self, head: str) -> Reply | None:
        """GEPA's system-aware merge of two kept candidates with a common ancestor, as an edit of the head."""
        keys = sorted(self.kept)
        table = self.table()
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                merged = self._merged(a, b, table)
                if merged is not None and merged not in (self.kept[a], self.kept[b], head):
                    current = unpack(head)
                    self.pending[content_hash(merged)] = a
                    return Reply({m: t for m, t in unpack(merged).items() if t != current.get(m)})
        return None

    def _merged(self, a: str, b: str, table: Mapping[str, Mapping[str, float]]) -> str | None:
        ancestor = _common_ancestor(a, b, self.parents)
        if ancestor is None or ancestor in (a, b):
            return None
        base, left, right = (unpack(self.kept[k]) for k in (ancestor, a, b))
        better = left if _mean(table.get(a, {})) >= _mean(table.get(b, {})) else right
        out = {}
        for member in base:
            changed_left, changed_right = left.get(member) != base[member], right.get(member) != base[member]
            out[member] = better[member] if changed_left and changed_right else \
                left[member] if changed_left else right.get(member, base[member])
        return _packed_like(self.kept[a], out)

    def repair(self, diff: Mapping[str, Any], head_text: str) -> str | dict[str, str]:
        """A candidate made on an older head, as a proposal on the current one (the published admission's stale
        policy): the texts the diff sets, whole, so that it is judged against the new head on its own scores, as
        GEPA judges every candidate against its pool (in a library, the members it sets on the new head's
        others)."""
        try:
            ops = [(op.get("member"), "" if op["action"] == "delete" else str(op["new"])) for op in diff["ops"]]
        except (KeyError, TypeError, AttributeError) as exc:
            raise InvalidProposalError(f"gepa: cannot read the stale diff to carry over ({exc})") from exc
        if not is_packed(head_text):
            return ops[-1][1] if ops else head_text
        return {str(member): text for member, text in ops if member is not None}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "kept": dict(self.kept), "parents": dict(self.parents),
                "pending": dict(self.pending), "proposals": self.proposals,
                "tasks": {k: t.to_dict() for k, t in self.tasks.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            kept, parents, pending = dict(data["kept"]), dict(data["parents"]), dict(data["pending"])
            proposals, tasks = int(data["proposals"]), {k: Task.from_dict(v) for k, v in data["tasks"].items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise StateDictError(f"gepa: malformed state ({exc})") from exc
        super().load_state_dict(data)
        self.kept, self.parents, self.pending, self.proposals, self.tasks = kept, parents, pending, proposals, tasks


def _packed_like(reference: str, texts: Mapping[str, str]) -> str:
    return pack(texts) if is_packed(reference) else next(iter(texts.values()))


def _mean(table: Mapping[str, float]) -> float:
    return sum(table.values()) / len(table) if table else 0.0


def _common_ancestor(a: str, b: str, parents: Mapping[str, str | None]) -> str | None:
    seen: set[str] = set()
    node: str | None = a
    while node is not None and node not in seen:
        seen.add(node)
        node = parents.get(node)
    node = b
    while node is not None:
        if node in seen:
            return node
        node = parents.get(node)
    return None


def _example(index: int, task: Task, output: str, score: float) -> str:
    expected = "" if task.expected is None else f"; the expected answer is {task.expected}"
    return (f"# Example {index}\nInput: {task.input}\nAnswer: {output or '(no answer)'}\n"
            f"Judgement: scored {score:.2f} of 1{expected}")


ADMISSIONS = ("published", "engine")


def admission_config(admission: str, *, minibatch: int, seed: int,
                     repair: Callable[[Mapping[str, Any], str], Any] | None = None) -> RunConfig:
    """The run settings of an admission rule (module doc); `repair` carries a stale candidate over to the current
    head (`GEPAAgent.repair`)."""
    one_of(admission, "gepa: admission", ADMISSIONS)
    if admission == "engine":
        return RunConfig(seed=seed)
    gate = GateConfig(screen_tasks=minibatch, early_stop=False, futility=0.0, focus=0, max_examples=None,
                      pool="val")
    staleness = Staleness() if repair is None else Staleness(policy=StalePolicy.REPAIR, repair=repair)
    return RunConfig(gate=gate, acceptance=Acceptance(rule="mean", margin=0.0), staleness=staleness, seed=seed)


def recipe(*, run: Solver | None = None, model: str | Provider | None = None, reflector: str | Provider | None = None,
           artifact: Artifact | Library | None = None, minibatch: int = 3, merge_every: int = 0, seed: int = 0,
           admission: str = "published", params: Mapping[str, Any] | None = None,
           solve_params: Mapping[str, Any] | None = None) -> Recipe:
    """GEPA as a `Recipe`: whole-text rewrites of the artifact (of each component, in a library), admitted by
    `admission` ("published" or "engine", see the module doc). `params` go to the reflector's calls,
    `solve_params` to the model's solving calls (with `model=`)."""
    solver, writer = resolve(run, model, reflector, solve_params=solve_params)
    members = None if not isinstance(artifact, Library) else [m.id for m in artifact if not m.frozen]
    agent = GEPAAgent(solver, writer, minibatch=minibatch, merge_every=merge_every, members=members, seed=seed,
                      params=params)
    strategy = WholeText() if not isinstance(artifact, Library) else {m.id: WholeText() for m in artifact}
    return Recipe("gepa", agent, strategy,
                  admission_config(admission, minibatch=minibatch, seed=seed, repair=agent.repair))


def gepa(tasks: Sequence[Task] | Splits, reward: Any, *, run: Solver | None = None,
         model: str | Provider | None = None, reflector: str | Provider | None = None,
         artifact: Artifact | Library | str | None = None, budget: Budget | None = None, asynchronous: bool = False,
         workers: int | Workers | None = None, store: str | Path | None = None, seed: int = 0, minibatch: int = 3,
         merge_every: int = 0, admission: str = "published", params: Mapping[str, Any] | None = None,
         solve_params: Mapping[str, Any] | None = None, callbacks: Sequence[Callback] = ()) -> Result:
    """Run GEPA on the engine (`asynchronous=True`: barrier-free). See `recipe` and the module doc."""
    start = Artifact("prompt", Kind.PROMPT, artifact) if isinstance(artifact, str) else artifact
    made = recipe(run=run, model=model, reflector=reflector, artifact=start, minibatch=minibatch,
                  merge_every=merge_every, seed=seed, admission=admission, params=params, solve_params=solve_params)
    return made.evolve(tasks, reward, artifact=start, budget=budget, asynchronous=asynchronous, workers=workers,
                       store=store, seed=seed, callbacks=callbacks)

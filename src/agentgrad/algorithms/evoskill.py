"""EvoSkill (Alzubi et al., 2026: "EvoSkill: Automated Skill Discovery for Multi-Agent Systems") as a recipe.

Failures become skill folders. A proposer reads a batch of training failures (their inputs, answers and ground
truths, preferring different categories), the skills the agent has, and the history of earlier proposals with
their outcomes, and decides to create a skill or to edit one; a skill writer then writes the folder (a name, a
description line, instructions). A top-K frontier of skill-library candidates, ranked by validation score, is the
selection: each proposal builds on a member chosen from it (the best by default), and a candidate joins it when
there is room or it beats the worst member. A proposal built on a member other than the head arrives as the
`Sections` edits that turn the head into that member plus the new folder; the engine's gate decides whether it
beats the head. See ``docs/concepts/algorithms/evoskill.md`` for what follows the paper and its code.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
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
from agentgrad.algorithms.evoskill_folders import (
    SkillProposal,
    describe,
    edits_towards,
    folders,
    parse_folder,
    parse_proposal,
)
from agentgrad.algorithms.evoskill_frontier import Frontier, Member
from agentgrad.core.artifact import Artifact
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, apply_ops
from agentgrad.core.library import Library, is_packed, member_text
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.providers.base import Provider, Usage
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.strategies.sections import Sections

PASS = 0.8  # EvoSkill counts a sample with a score below this as a failure
CLIP = 2000
IMPROVED, KEPT, DISCARDED = "improved", "kept", "discarded"


def _prompt(name: str) -> str:
    return (resources.files("agentgrad.algorithms") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def _clip(value: object, limit: int = CLIP) -> str:
    text = str(value).strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass(frozen=True)
class Failure:
    """A training failure the proposer may be shown: the task, the agent's answer, the truth and the category."""

    task_id: str
    input: str
    expected: str
    output: str
    category: str = ""


@dataclass(frozen=True)
class Feedback:
    """One line of EvoSkill's feedback history: a proposal and what became of it."""

    label: str
    action: str
    skill: str
    proposed: str
    justification: str
    outcome: str
    score: float | None
    parent_score: float


@dataclass(frozen=True)
class Pending:
    """A proposal the engine has not decided yet: what it was, its parent and the head it was written against."""

    label: str
    proposal: SkillProposal
    skill: str
    parent_score: float
    base: str


class EvoSkillAgent(RecipeAgent):
    """EvoSkill's proposer, skill writer, feedback history and frontier.

    Args:
        frontier: K, the size of the frontier of skill-library candidates (EvoSkill's ``frontier_size``, 3).
        selection: how the parent is chosen from the frontier: "best", "random" or "round_robin".
        failures: the most training failures shown in one proposal (the one at hand first).
        history: the most feedback entries shown (the newest).
        category: the task meta key whose value names a failure's category (failures of new categories first).
        member: in a run over a library, the member that holds the skills.
    State: the frontier, the remembered failures, the feedback history, the undecided proposals and the turn
    (`state_dict`), besides the base's trace log.
    """

    name = "evoskill"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, frontier: int = 3, selection: str = "best",
                 failures: int = 3, history: int = 8, category: str = "category", member: str = "skills") -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        if not all(isinstance(v, int) and v >= 1 for v in (failures, history)):
            raise ConfigError(f"evoskill: failures and history must be ints >= 1, got {failures!r}, {history!r}")
        self.frontier = Frontier(frontier, selection)
        self.shown, self.category, self.member = failures, category, member
        self.failures: deque[Failure] = deque(maxlen=32)
        self.feedback: deque[Feedback] = deque(maxlen=history)
        self.pending: dict[str, list[Pending]] = {}  # by task id, until the engine names the diff
        self.proposed: dict[str, tuple[Pending, str]] = {}  # by diff id: the proposal and the candidate's text
        self.turn = 0
        self.proposer_prompt, self.writer_prompt = _prompt("evoskill_proposer"), _prompt("evoskill_generator")

    # -- proposing ---------------------------------------------------------------------------------------------

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """Analyse the failures, ask for a skill to create or edit, have it written, and return the edits."""
        head = text_of(rendered)
        self._remember(task, output)
        if head not in self.frontier:
            self.frontier.admit(Member(f"head-{self.turn}", head, self._score(head) or 0.0))
        parent = self.frontier.select(self._rescore, self.rng, self.turn, head)
        self.turn += 1
        skills = folders(self._skills(parent.text))
        first = await self.ask(self._proposer_prompt(skills, self._batch(parent.text)))
        proposal = parse_proposal(str(first.text), skills)
        second = await self.ask(self._writer_prompt(proposal, skills))
        written = parse_folder(str(second.text), proposal)
        name = written.split("\n")[0][3:]
        edits = edits_towards(folders(self._skills(head)), {**skills, name: written})
        if not edits:
            raise InvalidProposalError(f"evoskill: the skill folder {name!r} changes nothing")
        label = f"iter-skill-{self.turn}"
        self.pending.setdefault(task.id, []).append(Pending(label, proposal, name, parent.score, head))
        usage = Usage(first.usage.input_tokens + second.usage.input_tokens,
                      first.usage.output_tokens + second.usage.output_tokens, first.usage.cost + second.usage.cost)
        return Reply(edits if isinstance(rendered, str) else {self.member: edits}, usage)

    def _skills(self, view: str) -> str:
        return member_text(view, self.member) if is_packed(view) else view

    def _score(self, text: str) -> float | None:
        scores = self.log.scores(text)
        return sum(scores.values()) / len(scores) if scores else None

    def _rescore(self, member: Member) -> float | None:
        """A head's mean score; a candidate's, over the tasks it or its base was scored on, the base's score
        standing where the candidate was not scored (a mean over the gate's few, focused tasks would flatter it)."""
        mine = self.log.scores(member.text)
        if member.base is None or not mine:
            return self._score(member.text)
        merged = {**self.log.scores(member.base), **mine}
        return sum(merged.values()) / len(merged)

    def _remember(self, task: Task, output: Any) -> None:
        answer = "(no answer: the call failed)" if output is None else output_text(output)
        failure = Failure(task.id, str(task.input), str(task.expected), answer,
                          str(task.meta.get(self.category, "")))
        kept = [f for f in self.failures if f.task_id != task.id]
        self.failures.clear()
        self.failures.extend([*kept, failure])

    def _batch(self, parent: str) -> list[Failure]:
        """The failures to show: the newest first, new categories before repeats, none the parent now passes."""
        passed = {t for t, s in self.log.scores(parent).items() if s >= PASS}
        newest = [f for f in reversed(self.failures) if f.task_id not in passed] or [self.failures[-1]]
        chosen: list[Failure] = []
        for fresh_only in (True, False):
            for failure in newest:
                seen = {f.category for f in chosen}
                if len(chosen) < self.shown and failure not in chosen and not (fresh_only and failure.category in seen):
                    chosen.append(failure)
        return chosen

    def _proposer_prompt(self, skills: Mapping[str, str], batch: Sequence[Failure]) -> str:
        listed = "\n".join(f"- {name}: {describe(text) or '(no description)'}" for name, text in skills.items())
        cases = "\n\n".join(f"### Failure {i} [Category: {f.category or 'none'}]\nInput: {_clip(f.input)}\n"
                            f"Agent answer: {_clip(f.output)}\nGround truth: {_clip(f.expected)}"
                            for i, f in enumerate(batch, 1))
        return self.proposer_prompt.format(skills=listed or "None", feedback=self._history(), count=len(batch),
                                           categories=", ".join(sorted({f.category or "none" for f in batch})),
                                           failures=cases)

    def _history(self) -> str:
        if not self.feedback:
            return "No previous attempts."
        return "\n\n".join(
            f"### {e.label}\nProposal: {e.action} {e.skill}: {_clip(e.proposed, 300)}\n"
            f"Justification: {_clip(e.justification, 200)}\nOutcome: {e.outcome.upper()}"
            + ("" if e.score is None else f" (score {e.score:.3f}, parent {e.parent_score:.3f})")
            for e in self.feedback)

    def _writer_prompt(self, proposal: SkillProposal, skills: Mapping[str, str]) -> str:
        target = proposal.target
        task = f"Revise the existing skill '{target}'." if target else "Create one new skill."
        existing = skills[target] if target else "(none: this is a new skill)"
        return self.writer_prompt.format(task=task, proposal=proposal.proposed,
                                         justification=proposal.justification or "(none given)", existing=existing)

    # -- the run's events --------------------------------------------------------------------------------------

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Tie each diff to its proposal; on its final verdict, offer it to the frontier and record the outcome."""
        task = str(payload.get("task", ""))
        if kind == "proposal" and self.pending.get(task):
            pending = self.pending[task].pop(0)
            diff = Diff.from_dict(dict(payload["diff"]))
            self.proposed[diff.id] = (pending, apply_ops(pending.base, diff.ops))
        elif kind == "proposal_failed" and self.pending.get(task):
            self.pending[task].pop(0)
        elif kind == "decision" and Outcome(payload["outcome"]).final:
            entry = self.proposed.pop(str(payload["diff_id"]), None)
            if entry is not None:
                self._decided(*entry, accepted=payload["outcome"] in (Outcome.ACCEPTED, Outcome.FUSED))

    def _decided(self, pending: Pending, candidate: str, *, accepted: bool) -> None:
        score = self._rescore(Member(pending.label, candidate, 0.0, pending.base))
        joined = score is not None and self.frontier.admit(Member(pending.label, candidate, score, pending.base))
        outcome = IMPROVED if accepted else KEPT if joined else DISCARDED
        p = pending.proposal
        self.feedback.append(Feedback(pending.label, p.action, pending.skill, p.proposed, p.justification, outcome,
                                      score, pending.parent_score))

    # -- state -------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "frontier": self.frontier.state_dict(), "turn": self.turn,
                "failures": [asdict(f) for f in self.failures], "feedback": [asdict(f) for f in self.feedback],
                "proposed": {d: {"pending": asdict(p), "candidate": c} for d, (p, c) in self.proposed.items()}}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            failures = [Failure(**f) for f in data["failures"]]
            feedback = [Feedback(**f) for f in data["feedback"]]
            proposed = {str(d): (_pending(e["pending"]), str(e["candidate"])) for d, e in data["proposed"].items()}
            turn = int(data["turn"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDictError(f"evoskill: malformed state ({exc})") from exc
        super().load_state_dict(data)
        self.frontier.load_state_dict(data["frontier"])
        self.failures.clear()
        self.failures.extend(failures)
        self.feedback.clear()
        self.feedback.extend(feedback)
        self.proposed, self.turn, self.pending = proposed, turn, {}


def _pending(data: Mapping[str, Any]) -> Pending:
    return Pending(str(data["label"]), SkillProposal(**data["proposal"]), str(data["skill"]),
                   float(data["parent_score"]), str(data["base"]))


def recipe(run: Solver | None = None, *, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, frontier: int = 3, selection: str = "best",
           failures: int = 3, history: int = 8, category: str = "category", member: str = "skills",
           params: Mapping[str, Any] | None = None) -> Recipe:
    """EvoSkill on the engine: its agent, skill folders as `Sections`, and a gate on validation tasks only (the
    proposer never sees them), over the whole split (EvoSkill scores each child on all of it)."""
    solver, writer = resolve(run, model, reflector)
    agent = EvoSkillAgent(solver, writer, seed=seed, params=params, frontier=frontier, selection=selection,
                          failures=failures, history=history, category=category, member=member)
    config = RunConfig(gate=GateConfig(pool="val", max_examples=None), seed=seed)
    return Recipe("evoskill", agent, Sections(), config, Budget(calls=300))


def evoskill(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
             model: str | Provider | None = None, reflector: str | Provider | None = None,
             artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
             budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
             store: str | Path | None = None, seed: int = 0, frontier: int = 3, selection: str = "best",
             failures: int = 3, history: int = 8, category: str = "category", member: str = "skills",
             params: Mapping[str, Any] | None = None, callbacks: Sequence[Callback] = ()) -> Result:
    """Evolve a skill library with EvoSkill (see `recipe` and `EvoSkillAgent` for the options)."""
    return recipe(run, model=model, reflector=reflector, seed=seed, frontier=frontier, selection=selection,
                  failures=failures, history=history, category=category, member=member, params=params).evolve(
        tasks, reward, artifact=artifact, budget=budget, asynchronous=asynchronous, workers=workers, store=store,
        seed=seed, callbacks=callbacks)

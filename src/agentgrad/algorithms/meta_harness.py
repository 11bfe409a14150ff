"""Meta-Harness (Lee et al., 2026: "Meta-Harness: End-to-End Optimization of Model Harnesses") as a recipe.

Harness search from raw traces. The agent keeps an archive of every harness the run tried (the heads and the
candidates, each with the hypothesis it tested, what it was built on, and its verdict). A proposal shows the
proposer earlier harnesses in full, each with its score and its raw execution traces from the `TraceLog` (input,
output, expected answer and score per training task, failures first, nothing summarised), and asks for one
hypothesis and a complete new harness copied from a base candidate of its choice. The proposal is a whole-text
replacement (`WholeText`): a harness built on an older candidate than the head arrives as that text, and the
engine's acceptance decides whether it beats the head. The harness is an L1 artifact (`Kind.HARNESS`): one change
is in flight at a time, and it lands only after a full check on the gate's whole pool. See
``docs/concepts/algorithms/meta_harness.md`` for what follows the paper and its code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from agentgrad.algorithms.base import Callback, Recipe, RecipeAgent, Reply, Reward, Solver, resolve, text_of
from agentgrad.algorithms.formats import asked, json_format, text_field
from agentgrad.core.artifact import Artifact, Kind, content_hash
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, apply_ops
from agentgrad.core.library import Library, is_packed, member_text
from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, InvalidProposalError, StateDictError
from agentgrad.optim.trust_region import TrustRegion
from agentgrad.providers.base import Provider
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.result import Result
from agentgrad.strategies.whole import WholeText

CLIP = 1500  # characters of one trace field shown (a raw trace, cut only when very long)
ARCHIVE = 256  # harnesses remembered (the oldest forgotten first, never the head)
_BLOCK = re.compile(r"```[a-zA-Z0-9_-]*\n(.*?)```", re.DOTALL)
_FIELD = re.compile(r"^\s*(HYPOTHESIS|BASE)\s*:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
#: The proposer's reply as one JSON object (`json_mode`): the same three parts as the fenced shape.
REPLY_FORMAT = json_format("meta_harness_candidate", {"hypothesis": text_field(300), "base": text_field(40),
                                                      "harness": text_field(1500)})
_JSON_SHAPE = ("## Reply with one JSON object\n"
               '{"hypothesis": "<one falsifiable claim>", "base": "<name of the candidate you copied>", '
               '"harness": "<the whole new harness, complete: it replaces the current one as it is>"}')


def _clip(value: object, limit: int = CLIP) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass(frozen=True)
class Harness:
    """An archived harness: its name, its text (what the solver saw: a harness or a packed library), the
    hypothesis it tested and the candidate it was built on (empty for a head), and its verdict so far."""

    name: str
    text: str
    hypothesis: str = ""
    base: str = ""
    outcome: str = "head"


@dataclass(frozen=True)
class Written:
    """The proposer's reply: the hypothesis, the base it names and the new harness."""

    hypothesis: str
    base: str
    code: str


def parse_reply(reply: str) -> Written:
    """The hypothesis, the base and the harness of a reply: a JSON object's fields (`json_mode`), else the last
    fenced block, or else (a small model may drop the fence) the reply without its HYPOTHESIS and BASE lines;
    `InvalidProposalError` when no harness is left."""
    try:
        data = json.loads(reply)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        if not isinstance(data.get("harness"), str) or not data["harness"].strip():
            raise InvalidProposalError(f"meta_harness: the reply's object holds no harness: {reply[:160]!r}")
        return Written(str(data.get("hypothesis", "")).strip(), str(data.get("base", "")).strip(), data["harness"])
    blocks = _BLOCK.findall(reply)
    head = reply.split("```", 1)[0] if blocks else reply
    fields = {k.upper(): v.strip() for k, v in _FIELD.findall(head)}
    code = blocks[-1].strip("\n") if blocks else _FIELD.sub("", reply).strip()
    if not code.strip():
        raise InvalidProposalError(f"meta_harness: the reply holds no harness: {reply[:160]!r}")
    return Written(fields.get("HYPOTHESIS", ""), fields.get("BASE", ""), code)


class MetaHarnessAgent(RecipeAgent):
    """Meta-Harness's proposer over an archive of harnesses and their raw traces.

    Args:
        shown: the most harnesses in one prompt (the head first, then the best scored, then the newest).
        traces: the most raw traces shown per harness (failures first).
        member: in a run over a library, the member that holds the harness.
        json_mode: ask for the reply as one JSON object through the model's structured output (`REPLY_FORMAT`: the
            hypothesis, the base and the harness, bounded in length), for a small model that stops after the
            HYPOTHESIS and BASE lines of the fenced shape. Off by default (not every provider takes
            ``response_format``).
    State: the archive, the training tasks seen and the undecided proposals (`state_dict`), besides the base's
    trace log.
    """

    name = "meta_harness"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, shown: int = 4, traces: int = 8,
                 member: str = "harness", json_mode: bool = False) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        if not all(isinstance(v, int) and v >= 1 for v in (shown, traces)):
            raise ConfigError(f"meta_harness: shown and traces must be ints >= 1, got {shown!r}, {traces!r}")
        self.shown, self.traces, self.member, self.json_mode = shown, traces, member, json_mode
        self.archive: dict[str, Harness] = {}  # by content hash, oldest first
        self.tasks: dict[str, tuple[str, str]] = {}  # training tasks seen by `propose`: input, expected answer
        self.pending: dict[str, list[tuple[Written, str]]] = {}  # by task id: the reply and the head it replaces
        self.proposed: dict[str, str] = {}  # diff id -> the candidate's content hash
        self.prompt = (resources.files("agentgrad.algorithms") / "prompts" / "meta_harness_proposer.md").read_text(
            encoding="utf-8")

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """Show earlier harnesses with their raw traces and scores; return the complete new harness."""
        view = text_of(rendered)
        self.tasks[task.id] = (str(task.input), str(task.expected))
        head = self.remember(view)
        reply = await self.ask(self.render(head), extra=asked(REPLY_FORMAT, self.json_mode))
        written = parse_reply(str(reply.text))
        if written.code.strip() == self._harness(view).strip():
            raise InvalidProposalError("meta_harness: the new harness is the current one")
        self.pending.setdefault(task.id, []).append((written, view))
        return Reply(written.code if isinstance(rendered, str) else {self.member: written.code}, reply.usage)

    def remember(self, text: str, **about: str) -> Harness:
        """The archived harness with `text`, added (named h0, h1, ...) if new; `about` updates its fields."""
        key = content_hash(text)
        entry = self.archive.get(key) or Harness(f"h{self._next()}", text)
        self.archive[key] = replace(entry, **about) if about else entry
        while len(self.archive) > ARCHIVE:
            oldest = next(k for k in self.archive if k != key)
            del self.archive[oldest]
        return self.archive[key]

    def _next(self) -> int:
        return 1 + max((int(h.name[1:]) for h in self.archive.values()), default=-1)

    def _harness(self, view: str) -> str:
        return member_text(view, self.member) if is_packed(view) else view

    def score(self, text: str) -> tuple[float, int] | None:
        """The mean reward of `text` over the tasks the run scored it on, and how many."""
        scores = self.log.scores(text)
        return (sum(scores.values()) / len(scores), len(scores)) if scores else None

    def chosen(self, head: Harness) -> list[Harness]:
        """The harnesses a prompt shows: the head, then the best scored, then the newest."""
        others = [h for h in self.archive.values() if h.text != head.text]
        newest = {h.name: i for i, h in enumerate(others)}
        ranked = sorted(others, key=lambda h: ((self.score(h.text) or (-1.0, 0))[0], newest[h.name]), reverse=True)
        return [head, *ranked[:self.shown - 1]]

    def render(self, head: Harness) -> str:
        """The proposer's prompt: the chosen harnesses in full with their scores and raw traces."""
        shown = self.chosen(head)
        blocks = [self._block(h, current=h is head) for h in shown]
        prompt = self.prompt.format(count=len(shown), total=len(self.archive), candidates="\n\n".join(blocks))
        return prompt.split("## Reply in exactly this shape")[0] + _JSON_SHAPE if self.json_mode else prompt

    def _block(self, harness: Harness, *, current: bool) -> str:
        score = self.score(harness.text)
        about = [f"score {score[0]:.3f} on {score[1]} tasks" if score else "not scored yet",
                 f"verdict: {harness.outcome}" + (" (current)" if current else "")]
        about += [f"built on {harness.base}"] if harness.base else []
        about += [f"hypothesis: {harness.hypothesis}"] if harness.hypothesis else []
        lines = [f"### {harness.name}: " + "; ".join(about), "```harness", self._harness(harness.text) or "(empty)",
                 "```", *self._traces(harness.text)]
        return "\n".join(lines)

    def _traces(self, text: str) -> list[str]:
        traces = [t for t in self.log.traces(text) if t.task_id in self.tasks]
        traces.sort(key=lambda t: t.score or 0.0)
        if not traces:
            return ["(no traces on training tasks yet)"]
        shown = traces[:self.traces]
        lines = [f"Raw traces ({len(shown)} of {len(traces)} on training tasks, failures first):"]
        for trace in shown:
            given, expected = self.tasks[trace.task_id]
            lines += [f"- task {trace.task_id}, score {trace.score}", f"  input: {_clip(given)}",
                      f"  output: {_clip(trace.output)}", f"  expected: {_clip(expected)}"]
        return lines

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """Archive each candidate with its hypothesis and base when it becomes a diff; record its verdict."""
        task = str(payload.get("task", ""))
        if kind == "proposal" and self.pending.get(task):
            written, base = self.pending[task].pop(0)
            diff = Diff.from_dict(dict(payload["diff"]))
            entry = self.remember(apply_ops(base, diff.ops), hypothesis=written.hypothesis, base=written.base,
                                  outcome="proposed")
            self.proposed[diff.id] = content_hash(entry.text)
            while len(self.proposed) > ARCHIVE:
                del self.proposed[next(iter(self.proposed))]
        elif kind == "proposal_failed" and self.pending.get(task):
            self.pending[task].pop(0)
        elif kind == "decision":
            self._decided(str(payload["diff_id"]), Outcome(payload["outcome"]))

    def _decided(self, diff_id: str, outcome: Outcome) -> None:
        key = self.proposed.get(diff_id)
        known = None if key is None else self.archive.get(key)
        if key is not None and known is not None:
            self.archive[key] = replace(known, outcome=outcome.value)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "archive": [asdict(h) for h in self.archive.values()],
                "tasks": {k: list(v) for k, v in self.tasks.items()}, "proposed": dict(self.proposed)}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        try:
            archive = [Harness(**h) for h in data["archive"]]
            tasks = {str(k): (str(v[0]), str(v[1])) for k, v in data["tasks"].items()}
            proposed = {str(k): str(v) for k, v in data["proposed"].items()}
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise StateDictError(f"meta_harness: malformed state ({exc})") from exc
        super().load_state_dict(data)
        self.archive = {content_hash(h.text): h for h in archive}
        self.tasks, self.proposed, self.pending = tasks, proposed, {}


def harness(artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None) -> Artifact | Library:
    """The artifact a Meta-Harness run evolves: a text (or nothing) becomes an L1 harness named "harness"."""
    if artifact is None or isinstance(artifact, str):
        return Artifact("harness", Kind.HARNESS, artifact or "")
    return artifact if isinstance(artifact, (Artifact, Library)) else Library.of(artifact)


def recipe(run: Solver | None = None, *, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, shown: int = 4, traces: int = 8,
           member: str = "harness", pool: str = "train+val", params: Mapping[str, Any] | None = None,
           json_mode: bool = False) -> Recipe:
    """Meta-Harness on the engine: its agent, whole-harness rewrites (one op of any size up to 50 000 characters)
    and one proposal at a time. The gate's `pool` is "train+val" by default: candidates are also scored on
    training tasks, so their raw traces reach the proposer (Meta-Harness's search set), and the full check an L1
    change needs covers that whole pool; "val" makes it a strict held-out check, with fewer traces to read. A
    candidate that goes stale while another is checked is dropped; it stays in the archive to be built on."""
    solver, writer = resolve(run, model, reflector)
    agent = MetaHarnessAgent(solver, writer, seed=seed, params=params, shown=shown, traces=traces, member=member,
                             json_mode=json_mode)
    config = RunConfig(gate=GateConfig(pool=pool), trust_region=TrustRegion(max_ops=1, max_chars=50_000),
                       workers=Workers(rollout=4, propose=1, gate=1), seed=seed)
    return Recipe("meta_harness", agent, WholeText(max_chars=50_000), config, Budget(calls=300))


def meta_harness(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
                 model: str | Provider | None = None, reflector: str | Provider | None = None,
                 artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
                 budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
                 store: str | Path | None = None, seed: int = 0, shown: int = 4, traces: int = 8,
                 member: str = "harness", pool: str = "train+val", params: Mapping[str, Any] | None = None,
                 json_mode: bool = False, callbacks: Sequence[Callback] = ()) -> Result:
    """Search for a better harness with Meta-Harness (see `recipe` and `MetaHarnessAgent` for the options)."""
    method = recipe(run, model=model, reflector=reflector, seed=seed, shown=shown, traces=traces, member=member,
                    pool=pool, params=params, json_mode=json_mode)
    return method.evolve(tasks, reward, artifact=harness(artifact), budget=budget, asynchronous=asynchronous,
                         workers=workers, store=store, seed=seed, callbacks=callbacks)

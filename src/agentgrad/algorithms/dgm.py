"""DGM (Zhang, Hu, Lu, Lange & Clune, "Darwin Gödel Machine", 2025): open-ended evolution of self-editing code.

An archive holds every agent variant that ran (compiled), each a code edit of its parent. Each self-improvement
draws a parent with probability proportional to sigmoid(λ (score − α₀)) / (1 + children), so good variants and
variants with few children both get picked (the released code's ``score_child_prop``); picks an example the parent
failed (or, when it crashes often, its crashes); asks a model to diagnose the failure and write ONE improvement as
an issue; then has it implement that issue as search/replace edits of the parent's code. The child runs in the
sandbox. Here the engine evaluates it: it is a whole-text replacement of the head (`WholeText`), the gate scores it
on validation tasks in stages (early stop), the acceptance test decides whether it becomes the head, and the
archive keeps every child that ran, better or not. `docs/concepts/algorithms/dgm.md` says what follows the paper.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgrad.algorithms.adas import START
from agentgrad.algorithms.adas_code import CodeAgent, SandboxSolver, add_usage, clip, load_prompt
from agentgrad.algorithms.base import Callback, Recipe, Reply, Reward, Solver, fenced, resolve
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

METHODS = ("score_child_prop", "score_prop", "random", "best", "latest")
_BLOCK = re.compile(r"<<<<<<< SEARCH\n(.*?)\n?=======\n(.*?)\n?>>>>>>> REPLACE", re.DOTALL)
_JSON = re.compile(r"```json\s*\n(.*?)```", re.DOTALL)
_FIELDS = ("id", "parent", "code", "score", "n", "entry", "outcome")
CRASHES = "crashes"  # the entry of a self-improvement that fixes the parent's crashes


def weights(archive: Sequence[Mapping[str, Any]], method: str = "score_child_prop", *, steepness: float = 10.0,
            midpoint: float = 0.5) -> list[float]:
    """How likely each archive entry is to be drawn as a parent (not normalised).

    score_child_prop: sigmoid(steepness (score − midpoint)) / (1 + children); score_prop: the sigmoid alone;
    random: uniform; best: only the best score; latest: only the newest (DGM's "no open-ended exploration").
    """
    if method not in METHODS:
        raise ConfigError(f"dgm: the parent selection must be one of {list(METHODS)}, got {method!r}")
    children = {str(e["id"]): 0 for e in archive}
    for entry in archive:
        if entry["parent"] in children:
            children[str(entry["parent"])] += 1
    scores = [float(e["score"] or 0.0) for e in archive]
    if method == "random":
        return [1.0] * len(archive)
    if method in ("best", "latest"):
        chosen = max(range(len(archive)), key=lambda i: (scores[i], -i)) if method == "best" else len(archive) - 1
        return [1.0 if i == chosen else 0.0 for i in range(len(archive))]
    sig = [1.0 / (1.0 + math.exp(-steepness * (s - midpoint))) for s in scores]
    if method == "score_prop":
        return sig
    return [w / (1 + children[str(e["id"])]) for w, e in zip(sig, archive, strict=True)]


def choose_parent(archive: Sequence[Mapping[str, Any]], rng: random.Random, method: str = "score_child_prop",
                  **shape: float) -> Mapping[str, Any]:
    """One parent drawn from `archive` by `weights`."""
    if not archive:
        raise ConfigError("dgm: the archive is empty; there is no parent to draw")
    return rng.choices(list(archive), weights(archive, method, **shape), k=1)[0]


def apply_edits(code: str, reply: str) -> str:
    """The parent's `code` with a reply's search/replace blocks applied in order, or the reply's whole module."""
    blocks = _BLOCK.findall(reply)
    if not blocks:
        module = fenced(reply)
        if "def " not in module:
            raise InvalidProposalError("dgm: the reply holds no search/replace block and no module")
        return module.rstrip() + "\n"
    for search, replacement in blocks:
        if search not in code:
            raise InvalidProposalError(f"dgm: a SEARCH block does not match the code: {clip(search, 120)!r}")
        code = code.replace(search, replacement, 1)
    return code


def parse_diagnosis(reply: str) -> dict[str, str]:
    """The diagnosis JSON (its ```json block, else the reply); `InvalidProposalError` without the issue fields."""
    found = _JSON.findall(reply)
    try:
        data = json.loads(found[-1] if found else fenced(reply))
    except json.JSONDecodeError as exc:
        raise InvalidProposalError(f"dgm: the diagnosis is not JSON ({exc})") from exc
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) and data[k].strip()
                                             for k in ("implementation_suggestion", "problem_description")):
        raise InvalidProposalError("dgm: the diagnosis lacks 'implementation_suggestion' or 'problem_description'")
    return {str(k): str(v) for k, v in data.items()}


class DGMAgent(CodeAgent):
    """The Darwin Gödel Machine's self-improvement step, with its archive and parent selection.

    Args:
        solver, reflector, seed, params: as `CodeAgent` (the reflector diagnoses and writes the edits).
        method: the parent selection (`METHODS`; DGM: score_child_prop).
        steepness, midpoint: λ and α₀ of the sigmoid (DGM: 10 and 0.5).
        crash_share, crash_chance: a parent that crashed on at least `crash_share` of its examples is diagnosed
            for its crashes with probability `crash_chance` (DGM's "empty patches" entry: 0.1 and 0.25).
        attempts: tries at a diagnosis that parses (DGM: 3).
        examples: failed examples of the parent shown in its diagnosis (DGM: 1, the one issue it works on).
    State: the archive (id, parent, code, score, examples scored, entry, outcome of each variant), the number of
    children drawn, and the `CodeAgent` state.
    """

    name = "dgm"

    def __init__(self, solver: Solver, reflector: Provider | None = None, *, seed: int = 0,
                 params: Mapping[str, Any] | None = None, method: str = "score_child_prop", steepness: float = 10.0,
                 midpoint: float = 0.5, crash_share: float = 0.1, crash_chance: float = 0.25,
                 attempts: int = 3, examples: int = 1) -> None:
        super().__init__(solver, reflector, seed=seed, params=params)
        weights([], method)  # refuses an unknown method now
        if min(attempts, examples) < 1:
            raise ConfigError("dgm: attempts and examples must be >= 1")
        self.method, self.shape = method, {"steepness": steepness, "midpoint": midpoint}
        self.crash_share, self.crash_chance, self.attempts = crash_share, crash_chance, attempts
        self.examples = examples
        self.archive: list[dict[str, Any]] = []
        self.born = 0

    async def propose(self, rendered: Any, task: Task, output: Any, reward: float) -> Reply:
        """One self-improvement: draw a parent, diagnose one of its failures, implement the fix as edits of it."""
        head = self.code(rendered)
        if not any(content_hash(e["code"]) == content_hash(head) for e in self.archive):
            self.archive.append(self.variant("initial" if not self.archive else f"head-{len(self.archive)}",
                                             None, head, "", "start"))
        self.refresh()
        parent = choose_parent(self.archive, self.rng, self.method, **self.shape)
        diagnosis, usage = await self.diagnose(parent, task if parent["code"] == head else None)
        system = load_prompt("dgm_system").substitute(code=parent["code"])
        prompt = load_prompt("dgm_implement").substitute(code=parent["code"],
                                                         suggestion=diagnosis["implementation_suggestion"],
                                                         problem=diagnosis["problem_description"])
        reply = await self.converse([Message("system", system), Message("user", prompt)])
        child = apply_edits(parent["code"], str(reply.text))
        if content_hash(child) == content_hash(parent["code"]):
            raise InvalidProposalError("dgm: the edits leave the parent's code as it was (an empty patch)")
        self.born += 1
        about = {"parent": parent["id"], "entry": diagnosis["entry"], "id": f"c{self.born}"}
        return Reply(self.draft(child, about), add_usage(usage, reply.usage))

    async def diagnose(self, parent: Mapping[str, Any], task: Task | None) -> tuple[dict[str, str], Usage]:
        """The diagnosis of one failure of `parent` (or of its crashes), retried until it parses; `task` is a
        failure of the parent's the engine just saw, if any."""
        system = load_prompt("dgm_system").substitute(code=parent["code"])
        entry, prompt = self.entry(parent, task)
        usage, error = Usage(), "no attempt"
        for _ in range(self.attempts):
            reply = await self.converse([Message("system", system), Message("user", prompt)])
            usage = add_usage(usage, reply.usage)
            try:
                return {**parse_diagnosis(str(reply.text)), "entry": entry}, usage
            except InvalidProposalError as exc:
                error = str(exc)
        raise InvalidProposalError(f"dgm: no usable diagnosis in {self.attempts} attempts ({error})")

    def entry(self, parent: Mapping[str, Any], task: Task | None) -> tuple[str, str]:
        """What the self-improvement works on, and its diagnosis prompt: the parent's crashes (now and then, when
        it crashes often), else `examples` examples it failed, drawn at random (`task` among them)."""
        code, traces = parent["code"], self.log.traces(parent["code"])
        crashed = [t for t in traces if isinstance(self.solver, SandboxSolver) and self.solver.error(code, t.task_id)]
        if traces and len(crashed) >= self.crash_share * len(traces) and self.rng.random() < self.crash_chance:
            last = self.solver.error(code, crashed[-1].task_id) if isinstance(self.solver, SandboxSolver) else ""
            return CRASHES, load_prompt("dgm_diagnose_crashes").substitute(
                crashed=len(crashed), ran=len(traces), error=clip(last or ""))
        failed = self.failures(code, task, 10**6)
        if not failed:
            raise InvalidProposalError(f"dgm: no failed example of parent {parent['id']} is known")
        cases = self.rng.sample(failed, min(self.examples, len(failed)))
        shown = "\n\n".join(f"----- Task {i} -----\n{c.show()}" for i, c in enumerate(cases, 1))
        record = f"{parent['n']} examples scored, mean {float(parent['score'] or 0.0):.2f}"
        return cases[0].task_id, load_prompt("dgm_diagnose").substitute(cases=shown, record=record)

    def variant(self, id_: str, parent: str | None, code: str, entry: str, outcome: str) -> dict[str, Any]:
        scores = list(self.log.scores(code).values())
        return {"id": id_, "parent": parent, "code": code, "score": sum(scores) / len(scores) if scores else None,
                "n": len(scores), "entry": entry, "outcome": outcome}

    def refresh(self) -> None:
        """Each variant's score from every score of its code the trace log holds (it grows as the run goes)."""
        for entry in self.archive:
            scores = list(self.log.scores(entry["code"]).values())
            if scores and len(scores) >= entry["n"]:
                entry["score"], entry["n"] = sum(scores) / len(scores), len(scores)

    def children(self, id_: str) -> int:
        return sum(1 for e in self.archive if e["parent"] == id_)

    def observe(self, kind: str, payload: Mapping[str, Any]) -> None:
        """A final verdict on a child adds it to the archive if it ran without crashing somewhere (DGM keeps every
        child that compiled, better or not)."""
        decided = self.decided(kind, payload)
        if decided is None:
            return
        draft, outcome = decided
        if self.log.scores(draft["code"]) and self.compiled(draft["code"]):
            self.archive.append(self.variant(draft["id"], draft["parent"], draft["code"], draft["entry"], outcome))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "archive": [dict(e) for e in self.archive], "born": self.born}

    def load_state_dict(self, data: Mapping[str, Any]) -> None:
        archive = data.get("archive")
        if not isinstance(archive, list) or not all(isinstance(e, Mapping) and set(_FIELDS) <= set(e)
                                                    for e in archive):
            raise StateDictError(f"dgm: 'archive' must be a list of entries with {list(_FIELDS)}")
        super().load_state_dict(data)
        self.archive = [{k: e[k] for k in _FIELDS} for e in archive]
        self.born = int(data.get("born", 0))


def recipe(*, run: Solver | None = None, model: str | Provider | None = None,
           reflector: str | Provider | None = None, seed: int = 0, sandbox: Sandbox | None = None,
           member: str | None = None, files: Mapping[str, str] | None = None, method: str = "score_child_prop",
           children: int = 2, stage: int = 10, eval_tasks: int = 30, params: Mapping[str, Any] | None = None,
           max_chars: int = 20000, timeout: float = 600.0, **agent_options: Any) -> Recipe:
    """DGM on the engine: `DGMAgent`, whole-program children, `children` self-improvements a round in the
    synchronous runtime (DGM: 2), and a staged gate on validation tasks: `stage` tasks a look, stopping early once
    the verdict is certain or hopeless, at most `eval_tasks` in all."""
    solver = run or SandboxSolver(sandbox, member=member, files=files)
    if isinstance(solver, SandboxSolver):
        solver.sandbox.isolation.require(network=solver.sandbox.network)  # refuse now, not on every call
    solver, writer = resolve(solver, model, reflector)
    agent = DGMAgent(solver, writer, seed=seed, params=params, method=method, **agent_options)
    gate = GateConfig(screen=False, focus=0, pool="val", chunk=stage, max_examples=eval_tasks, early_stop=True)
    config = RunConfig(workers=Workers(rollout=children, propose=children, gate=children), gate=gate,
                       acceptance=Acceptance(), staleness=Staleness(policy=StalePolicy.REPAIR, repair=agent.repair),
                       trust_region=TrustRegion(max_ops=1, max_chars=2 * max_chars), asynchronous=False, seed=seed,
                       timeout=timeout)
    return Recipe("dgm", agent, WholeText(max_chars=max_chars), config, Budget(calls=300))


def dgm(tasks: Sequence[Task] | Splits, reward: Reward, *, run: Solver | None = None,
        model: str | Provider | None = None, reflector: str | Provider | None = None,
        artifact: Artifact | Library | Mapping[str, Artifact | str] | str | None = None,
        budget: Budget | None = None, asynchronous: bool = False, workers: int | Workers | None = None,
        store: str | Path | None = None, seed: int = 0, callbacks: Sequence[Callback] = (),
        **options: Any) -> Result:
    """The Darwin Gödel Machine on `tasks`: evolve the program `artifact` (default: a module whose `run` echoes its
    input) with `reflector` (or `model`) diagnosing and editing; `options` go to `recipe` (sandbox, method, ...)."""
    start = Artifact("agent", Kind.HARNESS, artifact if isinstance(artifact, str) else START) \
        if artifact is None or isinstance(artifact, str) else artifact
    return recipe(run=run, model=model, reflector=reflector, seed=seed, **options).evolve(
        tasks, reward, artifact=start, budget=budget, asynchronous=asynchronous, workers=workers, store=store,
        seed=seed, callbacks=callbacks)

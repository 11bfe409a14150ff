"""`evolve()`: one call from an agent, a dataset and a scoring rule to a better agent."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from agentgrad.core._checks import function, items
from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.library import Library, unpack
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task
from agentgrad.errors import AgentgradError, ConfigError
from agentgrad.optim.aggregator import Aggregator
from agentgrad.optim.recipes import default
from agentgrad.optim.schedules import delta_schedule
from agentgrad.optim.stats import SIGN_TEST_PRIOR
from agentgrad.runtime.async_loop import run_async
from agentgrad.runtime.budget import DEFAULT_BUDGET, Budget, OutOfBudget
from agentgrad.runtime.config import RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.engine import Callback, Engine
from agentgrad.runtime.evaluator import UserFunctions
from agentgrad.runtime.frontier import frontier
from agentgrad.runtime.result import Result, RunUsage
from agentgrad.runtime.resume import restore
from agentgrad.runtime.smalldata import gate_power
from agentgrad.runtime.sync_loop import run_sync
from agentgrad.store.fsck import check_agreement
from agentgrad.store.kinds import CONFIG, EventKind
from agentgrad.store.ownership import WriterLock
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.base import Rendered, Strategy
from agentgrad.strategies.library import LibraryStrategy
from agentgrad.strategies.rules import AppendRules
from agentgrad.strategies.whole import WholeText

log = logging.getLogger("agentgrad")


def _user(run: Callable[..., Any] | None, propose: Callable[..., Any] | None, agent: Any,
          reward: Callable[..., Any], repair: Callable[..., Any] | None) -> UserFunctions:
    run = run or getattr(agent, "run", None)
    propose = propose or getattr(agent, "propose", None)
    if not callable(run) or not callable(propose):
        raise ConfigError("evolve needs run= and propose= (functions), or agent= with .run and .propose methods")
    if not callable(reward):
        raise ConfigError(f"reward must be a function (task, output) -> float in [0, 1], got {type(reward).__name__}")
    return UserFunctions(run, propose, reward, repair or getattr(agent, "repair", None))


def _splits(tasks: Sequence[Task] | Splits, seed: int) -> Splits:
    if isinstance(tasks, Splits):
        return tasks
    given = items(tasks, "tasks (agentgrad.data.Task values, see tasks_from_rows, or a Splits)", Task)
    return split(list(given), seed=seed)


Artifacts = Artifact | str | Library | Mapping[str, Artifact | str] | None


def _artifact(artifact: Artifacts) -> Artifact | Library:
    """The artifact a run evolves, or the library of several (a mapping or a `Library`)."""
    if isinstance(artifact, (Artifact, Library)):
        return artifact
    if artifact is None or isinstance(artifact, str):
        return Artifact("skill", Kind.SKILL, artifact or "")
    if isinstance(artifact, Mapping):
        return Library.of(artifact)
    raise ConfigError(f"artifact must be an Artifact, a string, a Library or a mapping of ids to artifacts, or "
                      f"None; got {type(artifact).__name__}")


def _member_strategy(artifact: Artifact) -> Strategy:
    return WholeText() if artifact.kind is Kind.HARNESS else AppendRules()


def _strategy(strategy: Strategy | Mapping[str, Strategy] | None, start: Artifact | Library) -> Strategy:
    """The run's strategy: the one given, or for a library one per member (given by id, else by kind)."""
    if isinstance(start, Artifact):
        if strategy is not None and not hasattr(strategy, "ops"):
            raise ConfigError("strategy must be a Strategy (a mapping of strategies is for a library of artifacts)")
        return AppendRules() if strategy is None else strategy  # type: ignore[return-value]
    if strategy is not None and not isinstance(strategy, Mapping):
        return LibraryStrategy({m.id: strategy for m in start}, start.layers())
    given = dict(strategy or {})
    unknown = sorted(set(given) - set(start.ids))
    if unknown:
        raise ConfigError(f"strategy names {unknown}, which are not artifacts of the library {list(start.ids)}")
    wrong = sorted(k for k, v in given.items() if not all(callable(getattr(v, f, None)) for f in ("ops", "render")))
    if wrong:
        raise ConfigError(f"the strategies of {wrong} are not Strategy values (AppendRules(), Sections(), ...)")
    return LibraryStrategy({m.id: given.get(m.id) or _member_strategy(m) for m in start}, start.layers())


def _budget(budget: Budget | None) -> Budget:
    """`budget` (or `DEFAULT_BUDGET`), refused with a `ConfigError` if it is no `Budget` or cannot pay one call."""
    budget = DEFAULT_BUDGET if budget is None else budget
    if not isinstance(budget, Budget):
        raise ConfigError(f"budget must be a Budget (e.g. Budget(calls=300)), got {type(budget).__name__}")
    unpayable = budget.cannot_pay()
    if unpayable is not None:
        raise ConfigError(f"the budget cannot pay for a single call: {unpayable}; nothing would be learned")
    return budget


def _config(config: RunConfig | None, staleness: Staleness | None) -> RunConfig:
    """`config` (or the default), refused with a `ConfigError` when it or `staleness` is of the wrong type."""
    if config is not None and not isinstance(config, RunConfig):
        raise ConfigError(f"config must be a RunConfig, got {type(config).__name__}")
    if staleness is not None and not isinstance(staleness, Staleness):
        raise ConfigError(f"staleness must be a Staleness, got {type(staleness).__name__}")
    return RunConfig() if config is None else config


def _check_hooks(callbacks: Sequence[Callback], clock: Callable[[], float] | None) -> None:
    """A `ConfigError` unless `callbacks` is a sequence of functions and `clock` is None or a function."""
    hooks = items(callbacks, "callbacks", object)
    if not all(callable(c) for c in hooks):
        raise ConfigError("callbacks must be functions (kind, payload) -> None, got "
                          f"{[type(c).__name__ for c in hooks if not callable(c)]}")
    if clock is not None:
        function(clock, "clock (a function returning seconds)")


def _run_dir(store: str | Path | None) -> Path:
    """The run directory (created), or a `ConfigError` saying why it cannot be."""
    if store is not None and not isinstance(store, (str, Path)):
        raise ConfigError(f"store must be a path (str or Path) to the run directory, got {type(store).__name__}")
    run_dir = Path(store) if store is not None else Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot use {str(run_dir)!r} as the run directory (store=): {reason}") from exc
    return run_dir


def _identity(artifact: Artifact, splits: Splits) -> str:
    ids = "\n".join(t.id for t in (*splits.train, *splits.val, *splits.test))
    name = artifact.id if artifact.kind is not Kind.LIBRARY else "library:" + ",".join(unpack(artifact.text))
    return hashlib.sha256(f"{name}\n{ids}".encode()).hexdigest()[:16]


def _open_run(run_dir: Path, start: Artifact | Library, splits: Splits, config: RunConfig, budget: Budget,
              clock: Callable[[], float]) -> tuple[SQLiteStore, bool]:
    store = SQLiteStore(run_dir, clock=clock)
    events = store.journal
    saved = events.get(CONFIG)
    artifact = start.packed() if isinstance(start, Library) else start
    identity = _identity(artifact, splits)
    if saved is not None:
        if saved["identity"] != identity:
            store.close()
            raise ConfigError(f"{run_dir} holds another run (different artifact or tasks); use a new store path")
        try:  # a resume: refuse a damaged directory rather than go on with less spent than was
            store.check_integrity()
            check_agreement(store, artifact.id)
        except BaseException:
            store.close(sync=False)
            raise
        return store, True
    with store.transaction():
        for member in start if isinstance(start, Library) else ():
            store.add_artifact(member)
        store.add_artifact(artifact)
        events.put(CONFIG, {"identity": identity, "artifact": artifact.id, "run": config.describe(),
                              "budget": budget.to_dict(), "protocol": splits.protocol})
    return store, False


def _leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)
    return [leaf for e in inner for leaf in _leaves(e)] if inner else [exc]


def systemic(exc: BaseException) -> AgentgradError:
    """The first agentgrad error behind `exc` (unwrapping task-group exception groups); re-raises `exc` when
    there is none (a bug, not a run failure)."""
    for leaf in _leaves(exc):
        if isinstance(leaf, AgentgradError):
            return leaf
    raise exc


def _aggregator(config: RunConfig, strategy: Strategy) -> Aggregator:
    alpha = 10**9 if config.staleness.policy is StalePolicy.KEEP else config.staleness.alpha_max
    a = config.acceptance
    region = config.trust_region
    return Aggregator(default(delta=a.delta, margin=a.margin, alpha_max=alpha, contradicts=strategy.contradicts,
                              looks=a.looks, first_share=a.first_share, promise=a.promise, max_ops=region.max_ops,
                              max_chars=region.max_chars, rule=a.rule, renew=a.renew))


def evolve(tasks: Sequence[Task] | Splits, reward: Callable[..., Any], *, run: Callable[..., Any] | None = None,
           propose: Callable[..., Any] | None = None, agent: Any = None,
           strategy: Strategy | Mapping[str, Strategy] | None = None, artifact: Artifacts = None,
           budget: Budget | None = None, workers: int | Workers | None = None,
           asynchronous: bool | None = None, staleness: Staleness | None = None, store: str | Path | None = None,
           seed: int | None = None, callbacks: Sequence[Callback] = (), config: RunConfig | None = None,
           clock: Callable[[], float] | None = None) -> Result:
    """Improve `artifact` on `tasks` with the user's `run`, `propose` and `reward`, within `budget`.

    `artifact` is one artifact (an `Artifact`, or a text: a skill), or several evolved together: a `Library`
    or a mapping of ids to artifacts. With a library, `run` and `propose` get a dict of each artifact's rendered
    text by id, `propose` may edit any artifact but the L0 ones (see `LibraryStrategy` for how an edit names its
    artifact), a change of several artifacts commits at once, and `strategy` may map ids to strategies.

    `run(rendered, task)` returns the agent's output; `propose(rendered, task, output, reward)` returns an edit
    (free text or structured) for the strategy (`output` is None when `run` failed on that task);
    `reward(task, output)` returns a float in [0, 1]. Without `budget`, the run spends `DEFAULT_BUDGET`
    (``Budget(calls=300)``: 300 calls of `run`, rollouts and gate evaluations together; the summary says which
    budget bound the run). Each may be a plain or an `async def` function; `agent=`
    may supply run, propose (and repair). `store` is the run directory: an existing one is resumed. `workers`,
    `asynchronous`, `staleness` and `seed`, when given, override `config`. `clock` (seconds, monotonic;
    `time.monotonic` by default) is the run's time port: a fake clock makes the optimizer's view of time, and so a
    synchronous run, reproducible. Returns a `Result`; a systemic fault sets `Result.error` and is logged.
    """
    base = _config(config, staleness)
    config = replace(base, workers=base.workers if workers is None else Workers.of(workers),
                     asynchronous=base.asynchronous if asynchronous is None else asynchronous,
                     staleness=staleness or base.staleness, seed=base.seed if seed is None else seed)
    user = _user(run, propose, agent, reward, config.staleness.repair)
    budget = _budget(budget)
    _check_hooks(callbacks, clock)
    splits = _splits(tasks, config.seed)
    start = _artifact(artifact)
    power = gate_power(n_val=len(splits.val), n_train=len(splits.train), gate=config.gate,
                       delta=config.acceptance.look_delta(delta_schedule(config.acceptance.delta)(0), 1),
                       margin=config.acceptance.margin, prior=SIGN_TEST_PRIOR, rule=config.acceptance.rule)
    if power.widened:
        log.info("the validation split has %d tasks: the gate draws evidence from the %d training tasks too",
                 len(splits.val), len(splits.train))
    splits = replace(splits, protocol=splits.protocol + power.protocol())
    run_dir = _run_dir(store)
    return anyio.run(_evolve, splits, start, _strategy(strategy, start), user, config, budget,
                     run_dir, list(callbacks), clock or time.monotonic)


async def _evolve(splits: Splits, start: Artifact | Library, strategy: Strategy, user: UserFunctions,
                  config: RunConfig, budget: Budget, run_dir: Path, callbacks: list[Callback],
                  clock: Callable[[], float]) -> Result:
    with WriterLock(run_dir):  # one writer per run directory (`RunDirLockedError` names the other one)
        return await _locked(splits, start, strategy, user, config, budget, run_dir, callbacks, clock)


async def _locked(splits: Splits, start: Artifact | Library, strategy: Strategy, user: UserFunctions,
                  config: RunConfig, budget: Budget, run_dir: Path, callbacks: list[Callback],
                  clock: Callable[[], float]) -> Result:
    store, resuming = _open_run(run_dir, start, splits, config, budget, time.time)
    artifact = start.packed() if isinstance(start, Library) else start
    tasks = {t.id: t for t in (*splits.train, *splits.val, *splits.test)}
    engine = Engine(tasks=tasks, train=[t.id for t in splits.train], val=[t.id for t in splits.val],
                    artifact=artifact, strategy=strategy, user=user, config=config, budget=budget, store=store,
                    aggregator=_aggregator(config, strategy), clock=clock, callbacks=callbacks,
                    library=start if isinstance(start, Library) else None)
    try:
        error = await _loop(engine, resuming, held_out_calls=2 * len(splits.test))
    except BaseException:
        store.close()
        raise
    engine.accounts.meter.used["wall_time"] = engine.journal.elapsed()  # the loop's time, not closing its books
    engine.close_open("not decided: the run ended (budget, time or an error) before its evaluation finished; "
                      "a resumed run evaluates it again")
    engine.checkpoint(wall_time=engine.accounts.meter.used["wall_time"])
    return await _finish(engine, splits, artifact, run_dir, error)


async def _loop(engine: Engine, resuming: bool, *, held_out_calls: int) -> AgentgradError | None:
    """Restore (when resuming), set aside the token and cost bound of the held-out calls, and run the loop; the
    agentgrad error that stopped it, if any (logged)."""
    try:
        engine.journal.tell(EventKind.STARTED, {"run_dir": str(engine.store.run_dir), "artifact": engine.artifact.id,
                                "resuming": resuming, "config": engine.config.describe(),
                                "budget": engine.accounts.meter.budget.to_dict(),
                                "splits": {"train": len(engine.train), "val": len(engine.val)}})
        pending = restore(engine) if resuming else []
        if resuming:
            engine.journal.emit(EventKind.RESUMED, {"steps": engine.journal.steps, "used": engine.accounts.meter.used,
                                            "in_flight": len(pending)})
        engine.held_out_affordable = not held_out_calls or engine.accounts.meter.hold(held_out_calls)
        if not engine.held_out_affordable:
            log.warning("the token or cost budget cannot set aside the held-out evaluation (%d calls at the "
                        "per-call bound); the held-out reward will not be measured", held_out_calls)
        async with engine.journal.group_commit():
            await (run_async(engine, pending) if engine.config.asynchronous else run_sync(engine, pending))
        engine.health.at_end()
    except Exception as exc:  # noqa: BLE001 - systemic() re-raises anything that is not an agentgrad error
        error = systemic(exc)
        log.error("agentgrad run in %s failed: %s: %s", engine.store.run_dir, type(error).__name__, error)
        engine.journal.emit(EventKind.FAILED, {"error": f"{type(error).__name__}: {error}"})
        return error
    return None


async def held_out(engine: Engine, text: str, task_ids: Sequence[str]) -> float | None:
    """Mean reward of `text` on held-out tasks: calls charged to the token and cost budgets (not to a count or the
    wall time; counted as test evaluations); OutOfBudget if one could not be reserved."""
    if not task_ids:
        return None
    scores: dict[str, float] = {}

    async def one(task_id: str) -> None:
        task = engine.tasks[task_id]
        try:
            outcome = await engine.accounts.budgeted("test_evals", engine.user.run,
                                                     (engine.strategy.render(text), task), engine.run_slots, task_id,
                                                     text_result=True)
        except OutOfBudget:
            return  # the mean below would be over fewer tasks: refused there
        engine.journal.counts["test_evals"] += 1
        scores[task_id] = await engine.evaluator.reward(task_id, outcome)

    async with anyio.create_task_group() as group:
        for task_id in engine.estimator.longest_first(list(task_ids)):
            group.start_soon(one, task_id)
    if len(scores) < len(task_ids):
        raise OutOfBudget("test_evals")
    return sum(scores.values()) / len(scores)


async def _held_out_pair(engine: Engine, start: str, final: str, test_ids: Sequence[str]) -> tuple[
        float | None, float | None, str]:
    """Held-out rewards of the starting and the learned text (scored once when they are equal), and a note for
    the protocol when they could not be measured."""
    engine.accounts.held_out_amounts = engine.accounts.meter.unhold(len(test_ids) * (1 if final == start else 2))
    if not engine.held_out_affordable:
        return None, None, "; the token or cost budget could not cover the held-out evaluation: not measured"
    engine.journal.tell(EventKind.HELD_OUT, {"tasks": len(test_ids), "texts": 1 if final == start else 2})
    texts = [start] if final == start else [start, final]
    means: dict[str, float | None] = {}

    async def score(text: str) -> None:
        try:
            means[text] = await held_out(engine, text, test_ids)
        except OutOfBudget:
            return  # not in `means`: reported below

    async with anyio.create_task_group() as group:  # both texts at once: one heavy tail, not two
        for text in texts:
            group.start_soon(score, text)
    if len(means) < len(texts):
        return None, None, "; the budget ran out during the held-out evaluation: not measured"
    return means[start], means[final], ""


def _readable(rendered: Rendered) -> str:
    """What the agent sees, as one text (a library's members each under a ``=== id ===`` line)."""
    if isinstance(rendered, str):
        return rendered
    return "".join(f"=== {key} ===\n{text.rstrip()}\n" for key, text in rendered.items())


async def _finish(engine: Engine, splits: Splits, artifact: Artifact, run_dir: Path,
                  error: AgentgradError | None) -> Result:
    store, test_ids = engine.store, [t.id for t in splits.test]
    final = store.artifact(artifact.id)
    baseline = learned = None
    note, started = "", engine.clock()
    if error is None and test_ids:
        try:
            baseline, learned, note = await _held_out_pair(engine, artifact.text, final.text, test_ids)
        except Exception as exc:  # noqa: BLE001 - systemic() re-raises anything that is not an agentgrad error
            error, baseline, learned = systemic(exc), None, None
    used = engine.accounts.meter.used
    engine.journal.counts.update(futile_stops=engine.gate.futile_stops, tasks_carried=engine.gate.tasks_carried,
                         over_bound_calls=engine.accounts.meter.over_bound)
    usage = RunUsage(int(used["rollouts"]), int(used["proposals"]), int(used["gate_evals"]),
                     engine.journal.counts["test_evals"], int(used["tokens"]), used["cost"], used["wall_time"],
                     engine.cache.hits, engine.gate.tasks_skipped, engine.clock() - started)
    protocol = splits.protocol + ("" if test_ids else "; no test split: the held-out reward is not reported") + note
    if error is not None and test_ids:
        protocol += "; the run failed: the held-out reward was not measured"
    members = list(unpack(final.text)) if final.kind is Kind.LIBRARY else [artifact.id]
    decisions = tuple(store.decisions(artifact_id=artifact.id))
    result = Result(final, _readable(engine.strategy.render(final.text)), learned, baseline, protocol,
                    tuple(store.history(artifact.id)), usage, dict(engine.journal.counts), decisions, run_dir,
                    error, engine.accounts.meter.budget, {m: store.artifact(m) for m in members},
                    {m: tuple(store.history(m)) for m in members}, frontier(decisions, store.evidence))
    engine.journal.emit(EventKind.FINISHED, {"ok": result.ok, "test_reward": learned, "baseline": baseline})
    store.close()  # writes the journal's deferred events, catches the git mirror up
    return result

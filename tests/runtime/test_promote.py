"""Promotion dev → stable: after every K accepted commits, once the validation split confirms it; a failed check
reverts the dev commits that made dev worse, and stable never moves back."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from dulwich.objects import Commit
from dulwich.refs import Ref
from dulwich.repo import Repo

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evaluator import UserFunctions
from agentgrad.runtime.evolve import _aggregator, _open_run, evolve
from agentgrad.runtime.promote import maybe_promote
from agentgrad.runtime.records import Snapshot
from agentgrad.store.events import EventLog
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.strategies.base import make_diff
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig
from tests.runtime.helpers import events

T = TypeVar("T")


def _run(tmp_path: Path, every: int) -> tuple[int, int, list[dict[str, object]]]:
    world = ReferenceWorld(WorldConfig(seed=1, n_categories=4, tasks_per_category=40, noise=0.0))
    agent = WorldAgent(world)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(rollouts=160), workers=4, asynchronous=False, store=tmp_path / "run",
                    config=RunConfig(promote_every=every))
    assert result.ok, result.error
    events = EventLog(tmp_path / "run")
    checks = [dict(e.payload) for e in events.read(["promotion"])]
    events.close()
    with SQLiteStore(tmp_path / "run", git=False) as store:
        return store.head(world.artifact.id).number, store.head(world.artifact.id, "stable").number, checks


def test_stable_follows_dev_after_every_k_accepted_commits_that_validation_confirms(tmp_path: Path) -> None:
    dev, stable, checks = _run(tmp_path, every=1)
    assert dev >= 2
    assert checks and all(c["outcome"] == "promoted" for c in checks)
    assert stable == max(int(str(c["dev"])) for c in checks) and stable >= dev - 1


def test_promotion_can_be_switched_off(tmp_path: Path) -> None:
    dev, stable, checks = _run(tmp_path, every=0)
    assert dev >= 1 and stable == 0 and checks == []


def test_async_checks_promote_the_version_they_checked_while_dev_moves_on(tmp_path: Path) -> None:
    world = ReferenceWorld(WorldConfig(seed=1, n_categories=4, tasks_per_category=40, noise=0.0))
    agent = WorldAgent(world, median=0.002, sigma=1.0)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(rollouts=160), workers=8, asynchronous=True, store=tmp_path / "run",
                    config=RunConfig(promote_every=1))
    assert result.ok, result.error
    events = EventLog(tmp_path / "run")
    checks = [dict(e.payload) for e in events.read(["promotion"])]
    events.close()
    promoted = [int(str(c["dev"])) for c in checks if c["outcome"] == "promoted"]
    assert promoted and promoted == sorted(promoted)
    with SQLiteStore(tmp_path / "run", git=False) as store:
        assert store.head(world.artifact.id, "stable").number == promoted[-1] <= store.head(world.artifact.id).number


# half the tasks are solved with no rule: a wrong rule for a category blocks the half of it the base solves
HALF = ReferenceWorld(WorldConfig(seed=3, n_categories=4, tasks_per_category=40, noise=0.0, base_rate=0.5))
AID = HALF.artifact.id
GEOMETRY, DATES, UNITS, ALGEBRA = HALF.categories
ROOMY = Budget(gate_evals=2000)


def _wrong(category: str) -> str:
    return f"{category}: use method {1 + HALF.methods[category] % HALF.config.n_methods}"


def _commit(engine: Engine, proposal: str, diff_id: str) -> Diff:
    """Commit `proposal` on the dev head with an ACCEPTED decision, as a step would."""
    made = make_diff(HALF.strategy, AID, engine.head.version, engine.head.text, proposal, author="w0")
    diff = Diff(AID, made.base_version, made.ops, made.author, id=diff_id)
    version = engine.store.commit(diff, Evidence(()), Decision(diff.id, AID, Outcome.ACCEPTED, "accept", "test", {},
                                                              fingerprint(diff)))
    engine.head = Snapshot(version.number, version.text)
    return diff


async def _check(engine: Engine) -> bool:
    """A promotion check, as the loops run one when it is due."""
    engine.promotion_due = True
    return await maybe_promote(engine)


def _with_engine(store: Path, body: Callable[[Engine], Awaitable[T]], *, budget: Budget = ROOMY) -> T:
    """`body(engine)` in an event loop, on an engine over `HALF` in run directory `store` (git mirror on)."""
    bot, config = WorldAgent(HALF), RunConfig(promote_every=1)
    splits = bot.splits()

    async def main() -> T:
        lib, _ = _open_run(store, HALF.artifact, splits, config, budget, time.time)
        engine = Engine(tasks={t.id: t for t in (*splits.train, *splits.val, *splits.test)},
                        train=[t.id for t in splits.train], val=[t.id for t in splits.val], artifact=HALF.artifact,
                        strategy=HALF.strategy, user=UserFunctions(bot.run, bot.propose, bot.reward), config=config,
                        budget=budget, store=lib, aggregator=_aggregator(config, HALF.strategy),
                        clock=time.monotonic)
        try:
            return await body(engine)
        finally:
            lib.close()

    return anyio.run(main)


def _val(text: str) -> float:
    return HALF.score(text, "val")


async def _good_then_harmful(engine: Engine) -> tuple[Diff, Diff]:
    """Commit the right rule for geometry (good), then wrong rules for dates and units (harmful), and check."""
    good = _commit(engine, HALF.right_rule(GEOMETRY), "good")
    harmful = _commit(engine, f"{_wrong(DATES)}\n{_wrong(UNITS)}", "harmful")
    assert _val(engine.head.text) < _val(HALF.artifact.text)  # dev is worse than stable (v0) on validation
    assert not await _check(engine)
    return good, harmful


def test_a_dev_commit_that_makes_dev_worse_than_stable_is_reverted_and_the_revert_recorded(tmp_path: Path) -> None:
    async def body(engine: Engine) -> dict[str, Any]:
        _, harmful = await _good_then_harmful(engine)
        store = engine.store
        assert store.head(AID).number == 3 and store.head(AID).text == store.version(AID, 1).text
        assert engine.head == Snapshot(3, store.version(AID, 1).text) and engine.touched[3] is None
        reverted = store.decisions(diff_id=harmful.id)[-1]
        assert (reverted.outcome, reverted.stage) == (Outcome.REVERTED, "revert")
        assert reverted.numbers["wins"] > reverted.numbers["losses"] == 0 and "wins" in reverted.reason
        inverse = store.decisions(diff_id=store.head(AID).diff_id)[-1]
        assert (inverse.outcome, inverse.stage) == (Outcome.ACCEPTED, "revert")
        assert engine.journal.counts["reverted"] == 1 and store.head(AID, "stable").number == 0
        store.sync_git()
        with Repo(str(tmp_path / "run" / "library.git")) as repo:
            tip = repo[repo.refs[Ref(b"refs/heads/dev")]]
            assert isinstance(tip, Commit)
            assert tip.message.decode().startswith(f"{AID} v3: revert {harmful.id}: promotion check")
        return {"harmful": harmful.id, "revert": inverse.diff_id}

    ids = _with_engine(tmp_path / "run", body)
    logged = events(tmp_path / "run", ["revert", "commit", "promotion"])
    assert [(k, p.get("diff"), p.get("outcome")) for k, p in logged] == [
        ("commit", ids["revert"], None), ("revert", ids["harmful"], "reverted"), ("promotion", None, "kept stable")]
    assert logged[-1][1]["reverted"] == [3] and logged[-1][1]["attribution"] == "done"


def test_a_good_commit_beside_a_harmful_one_is_kept(tmp_path: Path) -> None:
    async def body(engine: Engine) -> list[Outcome]:
        good, _ = await _good_then_harmful(engine)
        assert HALF.right_rule(GEOMETRY) in engine.store.head(AID).text
        return [d.outcome for d in engine.store.decisions(diff_id=good.id)]

    assert _with_engine(tmp_path / "run", body) == [Outcome.ACCEPTED]


def test_stable_never_moves_back_across_checks(tmp_path: Path) -> None:
    async def body(engine: Engine) -> tuple[list[int], list[str]]:
        stables = []
        _commit(engine, HALF.right_rule(GEOMETRY), "good")
        assert await _check(engine)  # stable: v1
        stables.append(engine.store.head(AID, "stable").number)
        _commit(engine, _wrong(DATES), "promoted-harm")
        engine.store.promote_to({AID: 2})  # a harmful commit that reached stable stays there
        stables.append(engine.store.head(AID, "stable").number)
        _commit(engine, _wrong(UNITS), "harmful")
        assert not await _check(engine)  # reverts v3 as v4
        stables.append(engine.store.head(AID, "stable").number)
        _commit(engine, HALF.right_rule(ALGEBRA), "better")
        assert await _check(engine)  # v5 is better than stable v2
        stables.append(engine.store.head(AID, "stable").number)
        return stables, [d.diff_id for d in engine.store.decisions(outcome=Outcome.REVERTED)]

    stables, reverted = _with_engine(tmp_path / "run", body)
    assert stables == [1, 2, 2, 5] and reverted == ["harmful"]


def test_a_check_with_no_budget_left_changes_nothing(tmp_path: Path) -> None:
    async def body(engine: Engine) -> tuple[int, int, int]:
        _commit(engine, HALF.right_rule(GEOMETRY), "good")
        _commit(engine, f"{_wrong(DATES)}\n{_wrong(UNITS)}", "harmful")
        assert not await _check(engine)
        store = engine.store
        return store.head(AID).number, store.head(AID, "stable").number, len(store.decisions(outcome="reverted"))

    assert _with_engine(tmp_path / "run", body, budget=Budget(gate_evals=10)) == (2, 0, 0)
    assert [p["outcome"] for _, p in events(tmp_path / "run", ["promotion", "revert"])] == ["no budget left"]


def test_attribution_that_runs_out_of_budget_reverts_nothing_it_could_not_judge(tmp_path: Path) -> None:
    n_val = len(HALF.val)

    async def body(engine: Engine) -> tuple[int, int]:
        _commit(engine, HALF.right_rule(GEOMETRY), "good")
        _commit(engine, f"{_wrong(DATES)}\n{_wrong(UNITS)}", "harmful")
        assert not await _check(engine)
        return engine.store.head(AID).number, engine.journal.counts["reverted"]

    assert _with_engine(tmp_path / "run", body, budget=Budget(gate_evals=2 * n_val + 1)) == (2, 0)
    check = events(tmp_path / "run", ["promotion"])[-1][1]
    assert (check["outcome"], check["reverted"], check["attribution"]) == ("kept stable", [], "no budget left")

"""Replication in a run: a rule for a category with one training task and no validation task, which no gate plan
can show a gain for, is committed once its origin task wins again in fresh contexts; nothing wrong or junk is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.optim.base import Candidate
from agentgrad.optim.judge import REPLICA_WINS
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.parking import Earlier
from agentgrad.runtime.policy import SYNC
from agentgrad.runtime.records import Proposed, Snapshot, candidate_from_dict, candidate_to_dict
from agentgrad.runtime.replicate import HeadWith, applied_on, combined, is_fresh, keeps_whole, without_commits
from agentgrad.runtime.stale import _base_scored, _focus_exhausted, _further_tasks, release_parked
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from agentgrad.testing.presets import preset
from agentgrad.testing.world import ReferenceWorld, WorldConfig
from tests.runtime import helpers
from tests.runtime.helpers import events

WORLD = preset("small_zipf")  # 29 tasks; 'probability' and 'strings' have one training task, none in validation


def rare() -> list[str]:
    w = WORLD
    return [c for c in w.categories if not any(w.tasks[t].category == c for t in w.val)
            and sum(w.tasks[t].category == c for t in w.train) == 1]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    store = tmp_path_factory.mktemp("replicate") / "run"
    clock = FakeClock()
    bot = WorldAgent(WORLD, median=0.001, sleep=clock.sleep)
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=WORLD.strategy, artifact=WORLD.artifact,
                    budget=Budget(calls=300), workers=1, asynchronous=False, store=store, seed=3, clock=clock.now)
    assert result.ok, result.error
    return store, result.artifact.text


def test_the_world_has_categories_no_gate_plan_can_show(small_run: tuple[Path, str]) -> None:
    assert rare() == ["probability", "strings"]


def test_rules_for_the_rare_categories_are_committed_by_replication(small_run: tuple[Path, str]) -> None:
    store, text = small_run
    assert all(WORLD.right_rule(c) in text for c in rare())
    accepted = [p for _, p in events(store, ["decision"]) if p["outcome"] == "accepted"]
    by_replication = [p for p in accepted if p["reason"].startswith("significant: replication of its origin task")]
    assert by_replication and all(p["numbers"]["p"] > p["numbers"]["threshold"] for p in by_replication)
    assert WORLD.audit(text)["wrong"] == 0 and WORLD.audit(text)["junk"] == 0


def test_the_committed_evidence_keeps_its_replica_rows(small_run: tuple[Path, str]) -> None:
    store, _ = small_run
    with SQLiteStore(store, git=False) as db:
        replicated = [db.evidence(v.diff_id) for v in db.history(WORLD.artifact.id) if v.diff_id is not None]
    marked = [e for e in replicated if e.replicas]
    assert marked
    for evidence in marked:
        rows = {r.task_id: r for r in evidence.rows}
        assert len({t.split("@")[0] for t in evidence.replicas}) == 1  # one origin task, in several contexts
        assert sum(rows[t].base == 0.0 and rows[t].candidate == 1.0 for t in evidence.replicas) >= REPLICA_WINS


def test_a_held_candidate_round_trips_with_its_replicate_shows_origin_and_closing_flags() -> None:
    diff = Diff("skills/s", 2, (Op.add("key", "a: use method 1"),), id="p1")
    candidate = Candidate(diff, Evidence((Row("t1", 0.0, 1.0),), replicas=("t1",)), looks=2, origin="t0",
                          replicate=True)
    assert candidate_from_dict(candidate_to_dict(candidate)) == candidate
    shown = replace(candidate, replicate=False, shows_origin=True)
    assert candidate_from_dict(candidate_to_dict(shown)) == shown
    closing = replace(candidate, closing=True)
    assert candidate_from_dict(candidate_to_dict(closing)) == closing


def test_a_change_applies_on_a_sibling_context_unless_it_conflicts_or_is_already_there() -> None:
    text = Artifact("skills/s", Kind.SKILL, "# s\n- a: use method 1\n").text
    add_b = Diff("skills/s", 0, (Op.add("key", "- b: use method 2"),), id="x")
    assert applied_on(add_b, text) == "# s\n- a: use method 1\n- b: use method 2\n"
    assert applied_on(add_b, "# s\n- b: use method 2\n") is None  # the context already has it
    assert applied_on(Diff("skills/s", 0, (Op.add("key", "- a: use method 3"),), id="y"), text) is None  # conflict


def test_a_sibling_keeps_the_head_whole_only_if_its_change_adds_without_rewriting_a_line() -> None:
    head = HeadWith("# s\n- dates: use method 6\n")
    assert keeps_whole(head, Diff("skills/s", 0, (Op.add("key", "- tip 6: show your work"),), id="tip"))
    wrong = Op.replace("key", "- dates: use method 6", "- dates: use method 8")
    assert not keeps_whole(head, Diff("skills/s", 0, (wrong,), id="wrong"))
    assert not keeps_whole(head, Diff("skills/s", 0, (Op.delete("key", "- dates: use method 6"),), id="drop"))
    assert not keeps_whole(head, Diff("skills/s", 0, (Op.add("key", "- dates: use method 8"),), id="clash"))


def test_the_head_with_a_siblings_change_is_made_once_per_sibling() -> None:
    head = HeadWith("# s\n- dates: use method 6\n")
    tip = Diff("skills/s", 0, (Op.add("key", "- tip 6: show your work"),), id="tip")
    first = head(tip)
    assert first == applied_on(tip, head.text) and head(tip) is first
    assert head(Diff("skills/s", 0, (Op.add("key", "- dates: use method 8"),), id="clash")) is None


def _parked(engine: Engine, origin: str, name: str = "p1") -> Candidate:
    diff = Diff(WORLD.artifact.id, 0, (Op.add("key", f"- {name}: use method 1"),), id=name)
    candidate = Candidate(diff, Evidence((Row(origin, 0.0, 1.0),), base_version=0), origin=origin, replicate=True)
    engine.hold_open([diff])
    engine.parking.park(candidate)
    return candidate


def test_parked_candidates_hold_exploration_back_only_while_a_context_can_still_be_found(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        _parked(engine, engine.train[0])  # 5 contexts x 2 calls to go: more than the 8 calls of the budget
        assert engine.pacing.exploring == 0 and len(engine.open) == 1
        assert not engine.pacing.explore_allowed() and engine.pacing.parked_blocks()  # the calls are its own
        assert engine.pacing.explore_allowed(parked=False)
        assert release_parked(engine, winding_down=True) == []  # born on the head, no earlier version: stranded
        assert engine.parking.stranded == frozenset(engine.parking.waiting)
        assert engine.pacing.explore_allowed() and not engine.pacing.parked_blocks()  # only a rollout brings work
        engine.parking.winding_down = False  # as before the run winds down: a later head may still come for it
        release_parked(engine)
        assert engine.parking.stranded == frozenset() and not engine.pacing.explore_allowed()

    helpers.on_engine(tmp_path / "run", body, budget=Budget(calls=8))


def test_parked_candidates_that_are_each_others_context_are_released_to_the_gate(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        for i in range(12):  # 12 x 5 contexts x 2 calls: more than the 100 calls of the budget
            _parked(engine, engine.train[i % len(engine.train)], f"p{i}")
        assert engine.pacing.parked_blocks()
        assert len(release_parked(engine, winding_down=True)) == 12 and not engine.parking.stranded

    helpers.on_engine(tmp_path / "run", body)


def test_candidates_released_for_a_context_keep_their_calls_until_back_or_decided(tmp_path: Path) -> None:
    """A synchronous round releases the parked candidates before its rollouts: priced as mere proposals, a round
    of rollouts spent the calls their later contexts needed (seven rules each one context short at the end, none
    committed)."""
    async def body(engine: Engine, bot: WorldAgent) -> None:
        engine.policy = SYNC
        for i in range(3):
            _parked(engine, engine.train[i], f"p{i}")
        assert engine.pacing.explore_allowed()  # 3 x 5 contexts x 2 calls, and a rollout's proposal (13 calls)
        assert len(release_parked(engine)) == 3 and not len(engine.parking)
        # each priced as a proposal (13 calls before any is judged) for the context it is out for, and at two calls
        # for each of the four contexts after: with a rollout's proposal, 76 calls, more than the 60 of the budget
        assert not engine.pacing.explore_allowed()
        for i in range(3):
            engine.open.drop(f"p{i}")  # decided
        assert engine.pacing.explore_allowed()

    helpers.on_engine(tmp_path / "run", body, budget=Budget(calls=60))


def test_a_parked_candidates_origin_is_passed_over_by_rollouts(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        first = engine.pacing.pick_task(0)
        _parked(engine, first)
        assert engine.pacing.pick_task(0) != first

    helpers.on_engine(tmp_path / "run", body)


def test_a_rollout_of_a_head_the_gate_already_ran_reuses_its_output_without_a_call(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        task = engine.train[0]
        score = await engine.gate.score(engine.head.text, task)  # the gate runs the head on a training task
        calls = bot.runs
        rollout = await engine.rollout("worker-0", engine.head, task)
        assert bot.runs == calls and rollout.reward == score and rollout.output is not None
        assert engine.journal.counts["reused_rollouts"] == 1
        await engine.rollout("worker-0", engine.head, task)  # a kept output serves one rollout only
        assert bot.runs == calls + 1

    helpers.on_engine(tmp_path / "run", body)


def test_a_context_the_change_cannot_apply_on_is_not_fresh_for_it(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        candidate = _parked(engine, engine.train[0])
        rival = Diff(WORLD.artifact.id, 0, (Op.add("key", "- p1: use method 2"),), id="rival")  # the same key
        other = Diff(WORLD.artifact.id, 0, (Op.add("key", "- q1: use method 2"),), id="other")
        assert is_fresh(engine, candidate, other)
        assert not is_fresh(engine, candidate, rival)  # the candidate conflicts there: replicate would park it again
        engine.parking.offer([rival])
        assert engine.parking.release(lambda c, s: is_fresh(engine, c, s)) == []

    helpers.on_engine(tmp_path / "run", body)


def test_an_earlier_version_is_fresh_unless_the_candidate_was_proposed_on_it(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        candidate = _parked(engine, engine.train[0])  # proposed (born) on version 0
        born = Earlier(0, engine.head.text)
        other = Earlier(7, engine.head.text + "- q1: use method 2\n")
        moved = replace(candidate, evidence=replace(candidate.evidence, base_version=None))
        assert not is_fresh(engine, moved, born)  # where it was picked for failing: never a context
        assert is_fresh(engine, moved, other)
        engine.open.drop(candidate.diff.id)
        assert not is_fresh(engine, moved, other)  # not known where it was born: no earlier version serves

    helpers.on_engine(tmp_path / "run", body)


def test_winding_down_releases_a_lone_candidate_on_an_earlier_version(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        _parked(engine, engine.train[0])
        assert release_parked(engine) == []  # the head is where its evidence is: no context yet
        assert release_parked(engine, winding_down=True) == []  # no earlier version than the one it was born on
        assert engine.parking.winding_down and len(engine.parking) == 1

    helpers.on_engine(tmp_path / "run", body)


def test_an_earlier_version_with_a_siblings_change_is_fresh_even_where_the_candidate_was_born(
        tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        candidate = _parked(engine, engine.train[0])  # born on version 0, the head
        other = _parked(engine, engine.train[1], "q1")
        born = Earlier(0, engine.head.text)
        both = combined(born, other.diff)
        assert both is not None and both.via == "q1" and "- q1: use method 1" in both.text
        assert not is_fresh(engine, candidate, born) and is_fresh(engine, candidate, both)
        assert combined(born, candidate.diff) is not None and not is_fresh(engine, candidate,
                                                                           combined(born, candidate.diff))
        assert combined(both, other.diff) is None  # one sibling a context
        assert release_parked(engine, winding_down=True) != []  # each other's context: released

    helpers.on_engine(tmp_path / "run", body)


def test_rare_rules_left_with_no_context_on_a_short_history_are_decided_on_earlier_versions_with_a_sibling(
        tmp_path: Path) -> None:
    # Eleven categories, 20 tasks: units and algebra have one training task each and none in validation. Both rules
    # waited for a context once the head and the two earlier versions were used up, and the run ended with over 140 of
    # its 220 calls unused and both undecided; earlier versions with the other's change serve now.
    world = ReferenceWorld(WorldConfig(n_categories=11, tasks_per_category=6, n_methods=5, noise=0.05, p_right=0.43,
                                       p_junk=0.148, p_contradict=0.14, p_duplicate=0.282, seed=1812, train=0.5,
                                       val=0.25, test=0.25, zipf=1.0))
    clock = FakeClock()
    bot = WorldAgent(world, median=0.001, sleep=clock.sleep)
    outcomes: list[str] = []

    def listen(kind: str, payload: Mapping[str, Any]) -> None:
        if kind == "decision":
            outcomes.append(str(payload["outcome"]))
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=220), workers=1, asynchronous=False, store=tmp_path / "run", seed=0,
                    clock=clock.now, callbacks=[listen])
    assert result.ok, result.error
    assert all(world.right_rule(c) in result.artifact.text for c in ("units", "algebra"))
    assert world.audit(result.artifact.text) == {"right": 4, "wrong": 0, "junk": 0}
    assert outcomes.count("deferred") <= 1 and result.usage.run_calls == 220  # at most the last, cut off by the budget


def test_near_the_end_of_a_tight_budget_the_calls_go_to_replications_not_to_rollouts(tmp_path: Path) -> None:
    """Draw 5 at 150 calls: without the calls kept for parked candidates (`split.replication_reserve`), a rollout
    takes those the strings rule's replicas need (first seen on draw 1)."""
    world = preset("small_zipf", 5)
    clock = FakeClock()
    bot = WorldAgent(world, median=0.001, sleep=clock.sleep)
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=150), workers=1, asynchronous=False, store=tmp_path / "run", seed=1,
                    clock=clock.now)
    assert result.ok, result.error
    rare_rules = [world.right_rule(c) for c in ("probability", "strings")]
    assert all(rule in result.artifact.text for rule in rare_rules)
    assert world.audit(result.artifact.text)["wrong"] == 0 and result.usage.rollouts + result.usage.gate_evals <= 150


def test_a_further_look_whose_new_focus_tasks_the_base_solves_is_a_replication_instead(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        origin = engine.train[0]
        head = engine.head
        focus, _ = engine.gate.plan(head.text, head.version, origin, 1)
        more, _ = engine.gate.plan(head.text, head.version, origin, 2)
        new = [t for t in more if t not in focus]
        assert focus and new
        diff = Diff(WORLD.artifact.id, 0, (Op.add("key", "- p1: use method 1"),), id="p1")
        rows = tuple(Row(t, 1.0, 1.0) for t in focus)
        candidate = Candidate(diff, Evidence(rows, base_version=0, focus=tuple(focus)), looks=1, origin=origin)
        proposed = Proposed(diff, head, None)
        assert not _focus_exhausted(engine, proposed, candidate)  # the base's scores there are not known
        for task in new[:-1]:
            engine.cache.put(head.text, task, 1.0)
        engine.cache.put(head.text, new[-1], 0.0)
        assert not _focus_exhausted(engine, proposed, candidate)  # one new task the base fails: room to win
        engine.cache.put(head.text, new[-1], 1.0)
        assert _focus_exhausted(engine, proposed, candidate)  # the look could only tie or lose: replicate

    helpers.on_engine(tmp_path / "run", body)


def test_a_further_look_of_an_unfocused_candidate_that_could_only_add_tasks_the_base_solves_is_a_replication(
        tmp_path: Path) -> None:
    """Without focus tasks the gain is looked for on every task: when the tasks a second look would add are all
    solved by the base (a rule for a rare category among tasks the head solves), it replicates instead."""
    async def body(engine: Engine, bot: WorldAgent) -> None:
        origin, head = engine.train[0], engine.head
        limit = engine.config.gate.max_examples
        assert limit is not None
        focus, rest = engine.gate.plan(head.text, head.version, origin, 2)
        plan = [*focus, *rest]
        first, new = plan[:limit], plan[limit:2 * limit]
        diff = Diff(WORLD.artifact.id, 0, (Op.add("key", "- p1: use method 1"),), id="p1")
        rows = tuple(Row(t, 0.0, 1.0) for t in first)
        for task in first:
            engine.cache.put(head.text, task, 0.0)  # scored on its first look
        candidate = Candidate(diff, Evidence(rows, base_version=0), looks=1, origin=origin)
        proposed = Proposed(diff, head, None)
        for task in new[:-1]:
            engine.cache.put(head.text, task, 1.0)
        assert not _focus_exhausted(engine, proposed, candidate)  # one new task the base's score is not known
        engine.cache.put(head.text, new[-1], 0.0)
        assert not _focus_exhausted(engine, proposed, candidate)  # one new task the base fails: room to win
        engine.cache.put(head.text, new[-1], 1.0)
        assert _focus_exhausted(engine, proposed, candidate)  # the look could only tie or lose: replicate
        for task in plan[2 * limit:]:
            engine.cache.put(head.text, task, 0.0)  # past the second look: not looked at
        assert _focus_exhausted(engine, proposed, candidate)

    helpers.on_engine(tmp_path / "run", body)


def test_the_base_is_scored_on_a_further_looks_tasks_before_it_is_decided_whether_to_extend_or_replicate(
        tmp_path: Path) -> None:
    """The choice reads the base's scores on the tasks a further look would add: they are scored first (calls the
    look makes anyway), so a rule that could only tie there replicates at once instead of being turned down on its
    second look and proposed again."""
    async def body(engine: Engine, bot: WorldAgent) -> None:
        origin, head = engine.train[0], engine.head
        diff = Diff(WORLD.artifact.id, 0, (Op.add("key", "- p1: use method 1"),), id="p1")
        candidate = Candidate(diff, Evidence((Row(engine.val[0], 0.0, 1.0),), base_version=0), looks=1,
                              origin=origin)
        proposed = Proposed(diff, head, None)
        tasks = _further_tasks(engine, proposed, candidate)
        assert tasks and not any(engine.cache.peek(head.text, t) is not None for t in tasks)
        await _base_scored(engine, proposed, candidate)
        assert all(engine.cache.peek(head.text, t) is not None for t in tasks)
        assert engine.accounts.meter.used["gate_evals"] == len(tasks)

    helpers.on_engine(tmp_path / "run", body)


def _commit_rule(engine: Engine, name: str, origin: str) -> None:
    """Commit the rule `name`, proposed from `origin`, on the head, as a step would."""
    diff = Diff(WORLD.artifact.id, engine.head.version, (Op.add("key", f"- {name}: use method 1"),), id=name)
    version = engine.store.commit(diff, Evidence(()), Decision(diff.id, WORLD.artifact.id, Outcome.ACCEPTED,
                                                              "accept", "test", {}, fingerprint(diff)))
    engine.watch.committed(version.number, version.text, engine.head.text, [origin])
    engine.head = Snapshot(version.number, version.text)


def test_the_head_without_one_earlier_commit_is_a_last_resort_context_oldest_commit_first(tmp_path: Path) -> None:
    """An override whose base rule was the last commit ties in every earlier version (each lacks the base): the
    head with an older commit taken out keeps it."""
    async def body(engine: Engine, bot: WorldAgent) -> None:
        origin = engine.train[0]
        far = engine.gate.far(origin, engine.train)[0]
        like = next(t for t in engine.train if t != origin and WORLD.tasks[t].category == WORLD.tasks[origin].category)
        for name, task in (("r1", far), ("r2", like), ("base", far)):
            _commit_rule(engine, name, task)
        history = engine.store.history(WORLD.artifact.id)
        made = without_commits(engine, history, 8)
        assert [e.without for e in made] == [1, 2]  # not the latest: without it the head is version 2 itself
        assert all(e.version == 3 and "- base: use method 1" in e.text for e in made)
        assert "- r1:" not in made[0].text and "- r2:" in made[0].text and "- r1:" in made[1].text
        assert without_commits(engine, history, 1) == made[:1]
        candidate = _parked(engine, engine.train[0])
        candidate = replace(candidate, evidence=replace(candidate.evidence, base_version=3))  # scored on the head
        engine.parking.park(candidate)
        assert is_fresh(engine, candidate, made[0]) and not is_fresh(engine, candidate, None)
        assert not is_fresh(engine, candidate, made[1])  # r2 was for a task like its origin: it might stand in
        ((released, _),) = release_parked(engine, winding_down=True)  # its first last-resort context
        assert engine.parking.siblings[released.diff.id] == made[0]

    helpers.on_engine(tmp_path / "run", body)

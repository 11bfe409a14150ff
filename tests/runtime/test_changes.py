"""Per-member staleness in a library run: only the versions that changed a member a diff edits count as its lag."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.changes import MemberChanges
from agentgrad.runtime.config import RunConfig, Staleness
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.evolve import _aggregator, _open_run, _splits, _strategy, _user
from agentgrad.runtime.records import Proposed, Snapshot
from agentgrad.runtime.stale import reanchor
from agentgrad.testing.library_world import LibraryWorld

WORLD = LibraryWorld(seed=3)


def _library_engine(run_dir: Path, config: RunConfig) -> Engine:
    splits, library = _splits(WORLD.tasks(), 1), WORLD.library()
    store, _ = _open_run(run_dir, library, splits, config, Budget(calls=100), time.time)
    strategy = _strategy(None, library)
    return Engine(tasks={t.id: t for t in (*splits.train, *splits.val, *splits.test)},
                  train=[t.id for t in splits.train], val=[t.id for t in splits.val], artifact=library.packed(),
                  strategy=strategy, user=_user(WORLD.run, WORLD.propose, None, WORLD.reward, None), config=config,
                  budget=Budget(calls=100), store=store, aggregator=_aggregator(config, strategy),
                  clock=time.monotonic, library=library)


def _commit(engine: Engine, op: Op) -> None:
    diff = Diff("library", engine.head.version, (op,))
    decision = Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "test", {}, fingerprint(diff))
    version = engine.store.commit(diff, Evidence(()), decision)
    engine.head = Snapshot(version.number, version.text)


def test_member_changes_are_read_from_the_store_per_version_and_bounded_by_the_span(tmp_path: Path) -> None:
    engine = _library_engine(tmp_path / "run", RunConfig())
    try:
        _commit(engine, Op.replace("text", "You answer geography questions.\n", "Be brief.\n").within("system"))
        _commit(engine, Op.add("rule", "- name the capital").within("skill"))
        _commit(engine, Op.add("rule", "- check it").within("verifier"))
        changes = MemberChanges(engine.store, "library", span=2)
        assert dict(changes.recent(3)) == {2: frozenset({"skill"}), 3: frozenset({"verifier"})}
        assert dict(MemberChanges(engine.store, "library").recent(3))[1] == frozenset({"system"})
        assert dict(engine.context().heads["library"].changes) == {
            1: frozenset({"system"}), 2: frozenset({"skill"}), 3: frozenset({"verifier"})}
    finally:
        engine.store.close()


def test_a_library_diff_is_not_stale_behind_commits_of_members_it_does_not_edit(tmp_path: Path) -> None:
    async def main() -> tuple[Proposed | Decision, Proposed | Decision]:
        engine = _library_engine(tmp_path / "run", RunConfig(staleness=Staleness(alpha_max=0)))
        try:
            base = engine.head
            skill = Proposed(Diff("library", 0, (Op.add("rule", "- name the capital").within("skill"),)), base, None)
            system = Proposed(Diff("library", 0, (Op.add("rule", "- be brief").within("system"),)), base, None)
            _commit(engine, Op.add("rule", "- check it").within("verifier"))
            _commit(engine, Op.add("rule", "- answer in English").within("system"))
            return reanchor(engine, skill), reanchor(engine, system)
        finally:
            engine.journal.events.close()
            engine.store.close()

    skill, system = anyio.run(main)
    assert isinstance(skill, Proposed) and skill.diff.base_version == 2  # moved onto the head, lag 0
    assert isinstance(system, Decision) and system.outcome is Outcome.STALE
    assert "lag 1 exceeds the tolerated lag 0" in system.reason  # one version changed `system`, not two

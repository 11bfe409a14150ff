"""A change that holds its origin task (a demonstration, never replicated) whose tasks like its origin are used up
is looked at again on every task, and stays so; any other change keeps its focus."""

from __future__ import annotations

from pathlib import Path

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.optim.base import Candidate
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.records import Proposed
from agentgrad.runtime.stale import _spreads
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import on_engine


def _candidate(engine: Engine, focus: tuple[str, ...], *, shows: bool, looks: int = 1) -> Candidate:
    diff = Diff("skill", engine.head.version, (Op.add("key", "- x: use method 1"),))
    rows = {t: 0.0 for t in focus}
    evidence = Evidence.paired(rows, {t: 1.0 for t in focus}, base_version=engine.head.version, focus=focus)
    return Candidate(diff, evidence, looks=looks, origin=engine.train[0], shows_origin=shows)


def test_a_demonstration_whose_focus_is_used_up_spreads_and_stays_spread(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        head = engine.head
        whole, _ = engine.gate.plan(head.text, head.version, engine.train[0], 2)
        assert whole  # the origin has tasks like it
        used_up = _candidate(engine, tuple(whole), shows=True)
        proposed = Proposed(used_up.diff, head, None)
        assert _spreads(engine, proposed, used_up, Outcome.EXTEND)
        assert not _spreads(engine, proposed, _candidate(engine, tuple(whole), shows=False), Outcome.EXTEND)
        assert not _spreads(engine, proposed, _candidate(engine, tuple(whole[:1]), shows=True), Outcome.EXTEND)
        assert _spreads(engine, proposed, _candidate(engine, (), shows=True, looks=2), Outcome.STALE)
        assert not _spreads(engine, proposed, _candidate(engine, (), shows=True, looks=1), Outcome.EXTEND)

    on_engine(tmp_path / "run", body)


def test_a_spread_look_has_no_focus_and_keeps_the_old_rows(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        head = engine.head
        focus, _ = engine.gate.plan(head.text, head.version, engine.train[0], 1)
        old = _candidate(engine, tuple(focus), shows=True).evidence
        texts = (head.text, head.text + "- geometry: use method 1\n")
        spread = await engine.gate.reverify("d1", texts, head.version, old, (), delta=0.05, looks=2,
                                            origin=engine.train[0], spread=True)
        kept = await engine.gate.reverify("d1", texts, head.version, old, (), delta=0.05, looks=2,
                                          origin=engine.train[0])
        assert spread.focus == () and set(kept.focus) >= set(focus)
        assert {r.task_id for r in old.rows} <= {r.task_id for r in spread.rows}

    on_engine(tmp_path / "run", body)

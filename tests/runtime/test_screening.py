"""The screen of a new proposal on its origin task, and the noise evidence it gives."""

from __future__ import annotations

from pathlib import Path

from agentgrad.core.diff import Diff, apply
from agentgrad.runtime.engine import Engine
from agentgrad.runtime.records import Proposed, Rollout, Snapshot
from agentgrad.strategies.base import make_diff
from agentgrad.testing.agents import WorldAgent
from tests.runtime.helpers import WORLD, on_engine

JUNK = "tip 7: be concise"  # changes no answer of the small world but by its noise


def _proposal(engine: Engine, diff_id: str, task: str) -> Proposed:
    """`JUNK` proposed on the head from a failed rollout of `task`."""
    head = engine.head
    made = make_diff(WORLD.strategy, WORLD.artifact.id, head.version, head.text, JUNK, author="w0")
    diff = Diff(made.artifact_id, made.base_version, made.ops, made.author, id=diff_id)
    engine.hold_open([diff])
    return Proposed(diff, head, Rollout("w0", task, head, "failed", 0.0, None))


def _fails(engine: Engine, proposed: Proposed, task: str) -> bool:
    """True if neither the head nor the candidate solves `task` (the world's noise included)."""
    texts = (engine.head.text, apply(proposed.diff, engine.head.text))
    return max(WORLD.solve(text, task) for text in texts) < 1.0


def test_a_change_screened_again_on_the_same_texts_is_no_new_noise_evidence(tmp_path: Path) -> None:
    """The second proposal of a change the screen turned down meets the same cached answer: rejected again, at no
    call, and its pair is not counted a second time as a task the noise left alone."""
    async def body(engine: Engine, bot: WorldAgent) -> None:
        task = next(t for t in engine.train if _fails(engine, _proposal(engine, "p000000", t), t))
        assert await engine.evaluate(_proposal(engine, "p000001", task)) is None
        runs = bot.runs
        assert await engine.evaluate(_proposal(engine, "p000002", task)) is None
        counts = engine.journal.counts
        assert (counts["screened_out"], counts["screen_repeats"], counts["gated"]) == (2, 1, 0)
        assert bot.runs == runs  # the cached scores answered
        assert engine.watch.screens == [(0.0, 0.0)]

    on_engine(tmp_path, body)


def test_the_same_change_on_another_head_or_from_another_task_is_new_noise_evidence(tmp_path: Path) -> None:
    async def body(engine: Engine, bot: WorldAgent) -> None:
        first, second = [t for t in engine.train if _fails(engine, _proposal(engine, "p000000", t), t)][:2]
        assert await engine.evaluate(_proposal(engine, "p000001", first)) is None
        assert await engine.evaluate(_proposal(engine, "p000002", second)) is None
        base = engine.head
        for i in range(10, 40):  # another head on which the change still fails `first`
            engine.head = Snapshot(base.version, f"{base.text}\n- tip {i}: number your steps")
            again = _proposal(engine, "p000003", first)
            if _fails(engine, again, first):
                break
        assert await engine.evaluate(again) is None
        assert engine.journal.counts["screened_out"] == 3 and not engine.journal.counts["screen_repeats"]
        assert len(engine.watch.screens) == 3

    on_engine(tmp_path, body)

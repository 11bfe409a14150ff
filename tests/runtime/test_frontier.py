"""The per-example frontier: examples only changes the run did not commit won, and those changes."""

from __future__ import annotations

from pathlib import Path

from agentgrad import Budget, Workers, evolve
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.evidence import Evidence, Row
from agentgrad.runtime.frontier import FrontierEntry, frontier
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing import drawn
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld


def verdict(diff_id: str, outcome: Outcome, harm_p: float = 1.0) -> Decision:
    return Decision(diff_id, "skill", outcome, "accept", "test", {"harm_p": harm_p})


def rows(*won: str, lost: tuple[str, ...] = (), tied: tuple[str, ...] = (), focus: tuple[str, ...] = ()) -> Evidence:
    return Evidence(tuple(Row(t, 0.0, 1.0) for t in won) + tuple(Row(t, 1.0, 0.0) for t in lost)
                    + tuple(Row(t, 0.0, 0.0) for t in tied), focus=focus)


def test_a_turned_down_change_that_won_what_no_commit_won_is_on_the_frontier() -> None:
    evidence = {"kept": rows("a", "b"), "near": rows("b", "c", "e", tied=("d",))}
    found = frontier([verdict("kept", Outcome.ACCEPTED), verdict("near", Outcome.REJECTED)], evidence.__getitem__)
    assert found == (FrontierEntry("c", ("near",), 1), FrontierEntry("e", ("near",), 1))  # b: the commit's; d: a tie


def test_a_change_needs_three_wins_where_it_should_act_and_the_commits_wins_count_anywhere() -> None:
    """Two wins are what the answer noise gives a change with no effect now and then; wins off its focus tasks
    (when it has some) do not count for it, while a committed change's win anywhere takes the example."""
    decisions = [verdict("kept", Outcome.ACCEPTED), verdict("two", Outcome.REJECTED), verdict("off", Outcome.REJECTED)]
    evidence = {"kept": rows("x", "b", tied=("y",), focus=("x", "y")), "two": rows("c", "e"),
                "off": rows("f", "g", "b", "h", focus=("f", "g", "b"))}  # h: off its focus; b: the commit won it
    found = frontier(decisions, evidence.__getitem__)
    assert found == (FrontierEntry("f", ("off",), 1), FrontierEntry("g", ("off",), 1))
    evidence["off"] = rows("f", "g", "h", tied=("b",), focus=("f", "g", "b"))
    assert frontier(decisions, evidence.__getitem__) == ()  # two wins on its focus: not enough


def test_harmful_reverted_fused_and_copied_changes_are_not_on_the_frontier() -> None:
    evidence = {name: rows("x", "y", "z", lost=("w",)) for name in ("harm", "reverted", "fused", "copy", "tabu")}
    decisions = [verdict("harm", Outcome.REJECTED, harm_p=0.01), verdict("reverted", Outcome.REVERTED),
                 verdict("fused", Outcome.FUSED), verdict("copy", Outcome.DUPLICATE), verdict("tabu", Outcome.TABU)]
    assert frontier(decisions, evidence.__getitem__) == ()
    assert len(frontier([verdict("harm", Outcome.REJECTED, harm_p=0.2)], evidence.__getitem__)) == 3


def test_a_change_undecided_at_the_end_counts_by_its_last_verdict() -> None:
    evidence = {"held": rows("x", "y", "z")}
    assert frontier([verdict("held", Outcome.ACCEPTED), verdict("held", Outcome.REVERTED)],
                    evidence.__getitem__) == ()
    assert [e.task_id for e in frontier([verdict("held", Outcome.EXTEND)], evidence.__getitem__)] == ["x", "y", "z"]


def test_replica_rows_count_for_their_origin_task_and_the_most_rows_won_come_first() -> None:
    replicated = Evidence((Row("o@ctx1", 0.0, 1.0), Row("o@ctx2", 0.0, 1.0), Row("o@ctx3", 0.0, 1.0),
                           Row("o@ctx4", 1.0, 1.0)), replicas=("o@ctx1", "o@ctx2", "o@ctx3", "o@ctx4"))
    evidence = {"rep": replicated, "one": rows("o", "z", "q"), "other": rows("z", "p", "r")}
    found = frontier([verdict(d, Outcome.REJECTED) for d in ("other", "one", "rep")], evidence.__getitem__)
    assert found[:2] == (FrontierEntry("o", ("rep", "one"), 4), FrontierEntry("z", ("one", "other"), 2))
    assert [e.task_id for e in found[2:]] == ["p", "q", "r"]


def test_a_run_reports_the_rule_its_few_contexts_could_not_prove(tmp_path: Path) -> None:
    """Two categories; the right rule of the rarer one (one validation task) won two of the three fresh contexts
    the run could make, one short of the design's least, and was turned down: the result names the examples it
    won, and the early stop says what more data would help."""
    world = ReferenceWorld(drawn.drawn(9, 31337))
    agent = WorldAgent(world, median=0.0, sigma=0.0)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=200), workers=Workers(rollout=1, propose=1, gate=1, slots=1),
                    store=tmp_path / "run", seed=0)
    assert result.ok, result.error
    assert result.frontier
    last = {d.diff_id: d for d in result.decisions}
    for entry in result.frontier:
        assert all(last[d].outcome is Outcome.REJECTED for d in entry.diff_ids)
        assert world.tasks[entry.task_id].category == "dates"
    with SQLiteStore(tmp_path / "run", git=False) as store:
        added = "\n".join(op.new or "" for op in store.diff(result.frontier[0].diff_ids[0]).ops)
    assert world.audit(added) == {"right": 1, "wrong": 0, "junk": 0}
    summary = result.summary()
    assert f"frontier: {len(result.frontier)} example(s) won only by changes not committed" in summary
    assert "or validation tasks like the frontier's examples" in summary

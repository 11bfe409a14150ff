"""The replication evidence of one change pooled across its proposals (an e-process): a right change proposed again
passes on the contexts of all its proposals, a change with no effect still passes at most at the test's level."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError
from agentgrad.optim.acceptance import AcceptanceState, accept_if
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.judge import EXTRA_REPLICAS, REPLICA_SHARE, REPLICAS, judge, may_replicate, origin_bound
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.pooled import P1, Replays, judge_pooled, log_e, may_go_on

ARTIFACT = "skills/s"
LOOK_2 = 0.015  # the default second look: 0.3 of δ = 0.05
QUIET = NoiseEstimate(win_room=200.0, wins=4.0, loss_room=400.0, losses=8.0)  # ~1-2% noise, well measured
WIN, MISS = (0.0, 1.0), (0.0, 0.0)


def replicated(pairs: list[tuple[float, float]], first: int = 0) -> Evidence:
    """Eight ties on solved tasks and one replica row of origin t99 per pair, in contexts `first`, `first` + 1..."""
    rows = [Row(f"t{i:02d}", 1.0, 1.0) for i in range(8)]
    marks = tuple(f"t99@{k:012x}" for k in range(first, first + len(pairs)))
    rows += [Row(mark, base, cand) for mark, (base, cand) in zip(marks, pairs, strict=True)]
    return Evidence(tuple(rows), base_version=0, replicas=marks)


def proposal(evidence: Evidence, author: str) -> Candidate:
    """One proposal of the same change (its fingerprint), by `author` (so its own diff id)."""
    diff = Diff(ARTIFACT, 0, (Op.add("key", "alpha: use method 3"),), author=author)
    return Candidate(diff, evidence, looks=2, origin="t99", replicate=True)


def decide(state: AcceptanceState, candidate: Candidate) -> tuple[Outcome, AcceptanceState, str]:
    stage = accept_if()
    batch, state = stage.update(Batch((candidate,)), state, Context({ARTIFACT: Head(0, "# s\n")}, noise=QUIET))
    (decision,) = batch.decisions
    return decision.outcome, state, decision.reason


def accept_init() -> AcceptanceState:
    return accept_if().init()


def test_a_change_proposed_again_passes_on_the_contexts_of_all_its_proposals() -> None:
    """2 full wins in 5 contexts fail the first proposal's own test; 2 of 2 in new contexts are too few for the
    second's own, but the 4 of 7 of both pass the pooled test at the second's (halved) level."""
    outcome, state, _ = decide(accept_init(), proposal(replicated([WIN, WIN, MISS, MISS, MISS]), "a"))
    assert outcome is Outcome.REJECTED and state.since_accepted == 1
    second = replicated([WIN, WIN], first=5)
    assert decide(accept_init(), proposal(second, "b"))[0] is Outcome.EXTEND  # alone: its own test, not yet
    outcome, after, reason = decide(state, proposal(second, "b"))
    assert outcome is Outcome.ACCEPTED and "across the proposals of this change: 4 full wins in 7" in reason
    q = origin_bound(QUIET, [0.0] * 7)
    assert log_e([Row("x", *p) for p in [WIN] * 4 + [MISS] * 3], q) >= math.log(2 / (LOOK_2 * REPLICA_SHARE))
    assert after.since_accepted == 0


def test_earlier_contexts_against_the_change_leave_the_next_proposal_its_own_test() -> None:
    """Pooled only where the earlier proposals' contexts favour the change (their e-process at least 1): after 0
    wins in 5 a fresh start of its own test needs fewer contexts."""
    _, state, _ = decide(accept_init(), proposal(replicated([MISS] * 5), "a"))
    outcome, _, reason = decide(state, proposal(replicated([WIN, WIN], first=5), "b"))
    assert outcome is Outcome.EXTEND and "across the proposals" not in reason and "in 2 of 5" in reason


def test_a_pooled_proposal_weighs_every_context_and_stops_once_it_can_no_longer_pass() -> None:
    _, state, _ = decide(accept_init(), proposal(replicated([WIN, WIN, MISS, MISS, MISS]), "a"))
    outcome, state, reason = decide(state, proposal(replicated([MISS], first=5), "b"))
    assert outcome is Outcome.EXTEND and "across the proposals of this change: 2 full wins in 6" in reason
    outcome, _, reason = decide(state, proposal(replicated([MISS] * 6, first=5), "b"))
    assert outcome is Outcome.REJECTED and "2 full wins in 11" in reason  # two left: winning both cannot pass


def test_a_proposal_keeps_the_test_it_began_with_when_another_one_adds_rows_meanwhile() -> None:
    """Which test is a proposal's is fixed at its look with its first replica row: one that began on its own test
    stays on it though a sibling proposal's rows arrive before its next look."""
    state = decide(accept_init(), proposal(replicated([WIN]), "a"))[1]  # a: its own test
    state = decide(state, proposal(replicated([WIN], first=9), "b"))[1]  # b: pooled (a's row was held)
    assert dict(state.replays.pooled) == {proposal(replicated([WIN]), "a").diff.id: 0,
                                          proposal(replicated([WIN]), "b").diff.id: 1}
    reason = decide(state, proposal(replicated([WIN, WIN]), "a"))[2]
    assert "across the proposals" not in reason and "replication of its origin task in 2 of 5" in reason


def test_the_same_context_scored_by_two_proposals_counts_once() -> None:
    state = decide(accept_init(), proposal(replicated([WIN, WIN, MISS, WIN]), "a"))[1]  # contexts 0-3
    rows = state.replays.rows_for(proposal(replicated([MISS, WIN, WIN], first=2), "b"), QUIET)  # 2-4
    assert rows is not None and len(rows[0]) == 5  # contexts 2 and 3 shared (one text, one cached answer)
    assert rows[1] == 1  # a's four were held when b's test began: one is new


LOUD = NoiseEstimate(win_room=100.0, wins=40.0, loss_room=100.0, losses=20.0)  # ~20% wins per row: bound 1/4
MIDDLE = NoiseEstimate(win_room=9.0, wins=1.0)  # a young run's bound, about 0.17


@pytest.mark.parametrize("noise", [LOUD, MIDDLE])
def test_under_the_null_re_proposals_pass_no_more_often_than_the_level(noise: NoiseEstimate) -> None:
    """A change with no effect, proposed up to six times, each proposal taking contexts until its test (its own for
    the first, the pooled one after where the earlier contexts favour the change) passes or can no longer pass:
    every context a full win with the most chance the bound allows. The run's level is spent over the failures
    (as `AcceptanceState.tried` makes it)."""
    rng = np.random.default_rng(5)
    fail = pass_ = float(np.sqrt(origin_bound(noise, [])))  # a full win as likely as the bound allows, no more
    accepts, trials = 0, 10_000
    for _ in range(trials):
        accepts += _null_run(rng, fail, pass_, noise)
    levels = sum(LOOK_2 * REPLICA_SHARE / (k + 1) for k in range(6))  # each proposal's test keeps its own level
    assert accepts / trials < levels


def _null_run(rng: np.random.Generator, fail: float, pass_: float, noise: NoiseEstimate) -> bool:
    rows: list[Row] = []
    for k in range(6):
        alpha, own = LOOK_2 / (k + 1), list[Row]()
        pooled = bool(rows) and log_e(rows, origin_bound(noise, [r.base for r in rows])) >= 0  # as `Replays`
        for n in range(REPLICAS + EXTRA_REPLICAS):
            own.append(Row(f"t99@{len(rows) + n:012x}", float(rng.random() > fail), float(rng.random() < pass_)))
            passes, more = _look([*rows, *own], own, alpha, noise) if pooled else _own_look(own, alpha, noise)
            if passes:
                return True
            if not more:
                break
        rows += own
    return False


def _own_look(own: list[Row], alpha: float, noise: NoiseEstimate) -> tuple[bool, bool]:
    evidence = Evidence(tuple(own), base_version=0, replicas=tuple(r.task_id for r in own))
    return (judge(evidence, delta=alpha, margin=0.02, noise=noise).passes,
            may_replicate(evidence, delta=alpha, noise=noise))


def _look(pooled: list[Row], own: list[Row], alpha: float, noise: NoiseEstimate) -> tuple[bool, bool]:
    q = origin_bound(noise, [r.base for r in pooled])
    return (log_e(pooled, q) >= -math.log(alpha * REPLICA_SHARE),
            may_go_on(pooled, own=len(own), alpha=alpha * REPLICA_SHARE, noise=noise))


def test_a_pooled_verdict_reports_its_e_value_as_a_p_value_and_keeps_the_harm_check() -> None:
    evidence = replicated([WIN] * 3)
    own = judge(evidence, delta=LOOK_2 * REPLICA_SHARE, margin=0.02, noise=QUIET)
    rows = [Row(f"t99@{k:012x}", *WIN) for k in range(3)]
    post = judge_pooled(own, rows, alpha=0.003, noise=QUIET)
    q = origin_bound(QUIET, [0.0] * 3)
    assert post.test == "pooled" and post.p_value == pytest.approx((q / P1) ** 3) and post.noise_win == q
    harmful = judge_pooled(type(own)(**{**own.__dict__, "harm_p": 0.001}), rows, alpha=0.5, noise=QUIET)
    assert not harmful.passes


def test_the_pooled_state_round_trips_and_refuses_damage() -> None:
    stage = accept_if()
    state = decide(stage.init(), proposal(replicated([WIN, MISS]), "a"))[1]
    again = stage.load(json.loads(json.dumps(state.to_dict())))
    assert again.replays == state.replays and again.replays.rows
    old = {k: v for k, v in state.to_dict().items() if k != "replays"}
    assert stage.load(old).replays == Replays()  # a state dict from before the pooled test
    damaged: list[dict[str, Any]] = [{"rows": {}}, {"rows": {"f": {"t@c": [0.0, 2.0]}}, "pooled": {}},
                                     {"rows": {}, "pooled": {"d": "yes"}}, {"rows": {}, "pooled": {"d": -1}},
                                     {"rows": [], "pooled": {}}]
    for bad in damaged:
        with pytest.raises(StateDictError, match="pooled replication"):
            stage.load({**old, "replays": bad})


def test_a_failed_replication_says_whether_its_contexts_still_favour_the_change_and_spends_its_extension() -> None:
    lucky = proposal(replicated([WIN, WIN, MISS, MISS, MISS, MISS, MISS, MISS]), "w1")  # 2 in 8 at q ~ 0.05
    batch, state = accept_if().update(Batch((lucky,)), accept_init(), Context({ARTIFACT: Head(0, "# s\n")},
                                                                            noise=QUIET))
    (decision,) = batch.decisions
    assert decision.outcome is Outcome.REJECTED and decision.numbers["favoured"] == 1.0
    assert "still favour" in decision.reason
    assert state.spent == (fingerprint(lucky.diff),)
    poor = proposal(replicated([WIN] + [MISS] * 7), "w2")
    outcome, state, reason = decide(accept_init(), poor)
    assert outcome is Outcome.REJECTED and "still favour" not in reason and state.spent == (fingerprint(poor.diff),)

"""The replication test: a change whose gain has no like task to show on is held, its origin task scored again in
fresh contexts, and committed only on full wins there; a change with no effect never passes, nor does harm."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError
from agentgrad.optim.acceptance import AcceptanceState, accept_if
from agentgrad.optim.base import Batch, Candidate, Context, Head
from agentgrad.optim.judge import (
    EXTRA_REPLICAS,
    REPLICA_BOUND,
    REPLICA_SHARE,
    REPLICA_WINS,
    REPLICAS,
    binom_tail,
    contexts_to_pass,
    judge,
    may_replicate,
    replica_bound,
    stage_one_wins,
)
from agentgrad.optim.noise import NoiseEstimate

ARTIFACT = "skills/s"
LOOK_2 = 0.015  # the default second look: 0.3 of δ = 0.05
QUIET = NoiseEstimate(win_room=200.0, wins=4.0, loss_room=400.0, losses=8.0)  # ~1-2% noise, well measured
LOUD = NoiseEstimate(win_room=100.0, wins=40.0, loss_room=100.0, losses=20.0)  # ~20% wins per row: bound 1/4


def replicated(pairs: list[tuple[float, float]], plain: int = 8, losses: int = 0) -> Evidence:
    """`plain` ordinary rows (ties on solved tasks, `losses` of them lost) and one replica row per pair."""
    rows = [Row(f"t{i:02d}", 1.0, 0.0 if i < losses else 1.0) for i in range(plain)]
    marks = tuple(f"t99@{k:012x}" for k in range(len(pairs)))
    rows += [Row(mark, base, cand) for mark, (base, cand) in zip(marks, pairs, strict=True)]
    return Evidence(tuple(rows), base_version=0, replicas=marks)


def held(evidence: Evidence, *, origin: str | None = "t99", looks: int = 1, noise: NoiseEstimate | None = QUIET,
         replicate: bool = False, shows_origin: bool = False, closing: bool = False) -> tuple[Outcome, Batch]:
    stage = accept_if()
    candidate = Candidate(Diff(ARTIFACT, 0, (Op.add("key", "alpha: use method 3"),)), evidence, looks=looks,
                          origin=origin, replicate=replicate, shows_origin=shows_origin, closing=closing)
    batch, _ = stage.update(Batch((candidate,)), stage.init(), Context({ARTIFACT: Head(0, "# s\n")}, noise=noise))
    (decision,) = batch.decisions
    return decision.outcome, batch


def test_the_bound_never_exceeds_a_quarter_and_follows_the_measured_noise() -> None:
    assert replica_bound(None) == REPLICA_BOUND == 0.25
    assert replica_bound(QUIET) < 0.05
    assert replica_bound(QUIET) < replica_bound(LOUD) <= REPLICA_BOUND


MIDDLING = NoiseEstimate(win_room=60.0, wins=8.0, loss_room=140.0, losses=5.0)  # a bound of about 0.07


def test_base_passes_in_the_contexts_raise_the_bound_to_the_origin_tasks_own_noise() -> None:
    """A junk tip on a task the model guesses right now and then won 3 of 5 contexts, the base passing in the other
    two: against the far rows' bound it passed (p = 0.0024); the origin task's own pass rate says it is noise."""
    q = replica_bound(MIDDLING)
    assert 0.06 < q < 0.075
    flips = replicated([(0.0, 1.0), (1.0, 1.0), (0.0, 1.0), (0.0, 1.0), (1.0, 1.0)])
    clean = replicated([(0.0, 1.0), (0.0, 0.0), (0.0, 1.0), (0.0, 1.0), (0.0, 0.0)])
    assert replica_bound(MIDDLING, clean) == q  # the base never passed: the far rows' bound stands
    assert replica_bound(MIDDLING, flips) > 1.5 * q
    assert binom_tail(3, REPLICAS, q) < LOOK_2 * REPLICA_SHARE  # three wins pass against the far rows alone ...
    assert not judge(flips, delta=LOOK_2, margin=0.02, noise=MIDDLING).passes  # ... not with two base passes
    assert judge(clean, delta=LOOK_2, margin=0.02, noise=MIDDLING).passes
    assert 0.2 < replica_bound(MIDDLING, replicated([(1.0, 1.0)] * 20)) <= REPLICA_BOUND  # a coin flip


def test_three_full_wins_pass_where_the_noise_is_quiet_and_two_do_not() -> None:
    three = judge(replicated([(0.0, 1.0)] * 3), delta=LOOK_2, margin=0.02, noise=QUIET)
    two = judge(replicated([(0.0, 1.0)] * 2), delta=LOOK_2, margin=0.02, noise=QUIET)
    assert three.test == "replicated" and three.passes and three.delta == pytest.approx(LOOK_2 * REPLICA_SHARE)
    assert three.p_value == pytest.approx(binom_tail(3, REPLICAS, replica_bound(QUIET)))
    assert not two.passes and two.p_value == 1.0  # fewer than REPLICA_WINS, however quiet the noise
    assert REPLICA_WINS == 3


def test_loud_noise_needs_a_full_win_in_every_context() -> None:
    assert replica_bound(LOUD) > 0.2
    assert not judge(replicated([(0.0, 1.0)] * 4 + [(1.0, 1.0)]), delta=LOOK_2, margin=0.02, noise=LOUD).passes
    assert judge(replicated([(0.0, 1.0)] * 5), delta=LOOK_2, margin=0.02, noise=LOUD).passes


@pytest.mark.parametrize("pairs", [[(1.0, 1.0)] * 3, [(0.0, 0.0)] * 3, [(0.0, 0.5)] * 3, [(1.0, 0.0)] * 3])
def test_ties_partial_scores_and_losses_in_every_context_never_pass(pairs: list[tuple[float, float]]) -> None:
    verdict = judge(replicated(pairs), delta=0.49, margin=0.0, noise=QUIET)
    assert not verdict.passes and verdict.p_value == 1.0


def test_harm_on_the_other_rows_blocks_even_clean_replicas() -> None:
    verdict = judge(replicated([(0.0, 1.0)] * 3, plain=10, losses=6), delta=LOOK_2, margin=0.02, noise=QUIET)
    assert verdict.harmful and not verdict.passes


def test_a_lone_noise_loss_elsewhere_does_not_block_a_replicated_gain() -> None:
    verdict = judge(replicated([(0.0, 1.0)] * 3, plain=20, losses=2), delta=LOOK_2, margin=0.02, noise=QUIET)
    assert verdict.total.wins == verdict.total.losses + 1
    assert not verdict.harmful and verdict.passes


def test_waiting_continues_only_while_the_remaining_contexts_could_still_pass() -> None:
    assert may_replicate(replicated([(0.0, 1.0)]), delta=LOOK_2, noise=QUIET)
    assert may_replicate(replicated([(1.0, 1.0)] * 2), delta=LOOK_2, noise=QUIET)  # 3 of 5 can still come
    assert not may_replicate(replicated([(1.0, 1.0)] * 2), delta=LOOK_2, noise=LOUD)  # 4 of 5 never pass now
    assert not may_replicate(replicated([(1.0, 1.0)] * 3), delta=LOOK_2, noise=QUIET)  # at most 2 wins now
    assert not may_replicate(replicated([(0.0, 1.0)] * 5), delta=LOOK_2, noise=QUIET)  # the design is complete


def sequential(pairs: list[tuple[float, float]], noise: NoiseEstimate) -> tuple[bool, int]:
    """(accepted, contexts used) when the contexts come one at a time, as the runtime gives them."""
    for n in range(1, len(pairs) + 1):
        evidence = replicated(pairs[:n])
        if judge(evidence, delta=LOOK_2, margin=0.02, noise=noise).passes:
            return True, n
        if not may_replicate(evidence, delta=LOOK_2, noise=noise):
            return False, n
    return False, len(pairs)


MIDDLE = NoiseEstimate(win_room=9.0, wins=1.0)  # a young run's bound, about 0.17


@pytest.mark.parametrize("noise", [LOUD, MIDDLE, QUIET])
def test_under_the_null_the_false_accept_rate_stays_below_delta(noise: NoiseEstimate) -> None:
    rng = np.random.default_rng(7)
    fail = pass_ = float(np.sqrt(replica_bound(noise)))  # a full win as likely as the bound allows, no more
    accepts, trials = 0, 20_000
    for _ in range(trials):
        pairs = [(float(rng.random() > fail), float(rng.random() < pass_)) for _ in range(REPLICAS + EXTRA_REPLICAS)]
        accepts += sequential(pairs, noise)[0]
    assert accepts / trials < LOOK_2 * REPLICA_SHARE


TENTH = NoiseEstimate(win_room=100.0, wins=14.0, loss_room=140.0, losses=5.0)  # a bound of about 0.09


def test_a_closing_look_ends_the_design_at_the_contexts_the_run_had() -> None:
    """A rare category's rule won all three contexts a short run could make; against the five-context design
    (p = P(Bin(5, q) >= 3)) that is not enough and it was left undecided; its closing look tests P(Bin(3, q) >= 3)."""
    q, alpha = replica_bound(TENTH), LOOK_2 * REPLICA_SHARE
    assert binom_tail(3, REPLICAS, q) >= alpha > binom_tail(3, 3, q)
    three = replicated([(0.0, 1.0)] * 3)
    assert not judge(three, delta=LOOK_2, margin=0.02, noise=TENTH).passes
    closed = judge(three, delta=LOOK_2, margin=0.02, noise=TENTH, closing=True)
    assert closed.passes and closed.p_value == pytest.approx(binom_tail(3, 3, q))
    assert f"in 3 fresh contexts, all the run had (a closing look; {REPLICAS} by design)" in closed.describe()
    for pairs in ([(0.0, 1.0)] * 2, [(0.0, 1.0)] * 2 + [(1.0, 1.0)], [(1.0, 1.0)] * 4, [(0.0, 0.0)] * 3):
        assert not judge(replicated(pairs), delta=0.49, margin=0.0, noise=QUIET, closing=True).passes
    assert not judge(three, delta=LOOK_2, margin=0.02, noise=LOUD, closing=True).passes  # 0.25^3 > 0.003


def test_a_closing_look_is_final_accepted_or_rejected_never_held_again() -> None:
    three, two = replicated([(0.0, 1.0)] * 3), replicated([(0.0, 1.0)] * 2)
    assert held(three, looks=2, replicate=True, noise=TENTH)[0] is Outcome.EXTEND
    assert held(three, looks=2, replicate=True, noise=TENTH, closing=True)[0] is Outcome.ACCEPTED
    assert held(two, looks=2, replicate=True)[0] is Outcome.EXTEND
    outcome, batch = held(two, looks=2, replicate=True, closing=True)
    assert outcome is Outcome.REJECTED and "all the run had" in batch.decisions[0].reason


def closed_early(pairs: list[tuple[float, float]], noise: NoiseEstimate, end: int) -> bool:
    """Accepted when the contexts come one at a time and the run has only `end` of them (a closing look there)."""
    for n in range(1, min(end, len(pairs)) + 1):
        evidence = replicated(pairs[:n])
        if judge(evidence, delta=LOOK_2, margin=0.02, noise=noise, closing=n == end).passes:
            return True
        if not may_replicate(evidence, delta=LOOK_2, noise=noise):
            return False
    return False


@pytest.mark.parametrize("noise", [LOUD, MIDDLE, TENTH, QUIET])
def test_under_the_null_closing_looks_at_an_end_blind_to_the_scores_keep_the_false_accept_rate(
        noise: NoiseEstimate) -> None:
    rng = np.random.default_rng(11)
    fail = pass_ = float(np.sqrt(replica_bound(noise)))
    accepts, trials = 0, 20_000
    for _ in range(trials):
        pairs = [(float(rng.random() > fail), float(rng.random() < pass_)) for _ in range(REPLICAS + EXTRA_REPLICAS)]
        accepts += closed_early(pairs, noise, int(rng.integers(1, REPLICAS + EXTRA_REPLICAS + 1)))
    assert accepts / trials < LOOK_2 * REPLICA_SHARE


def test_a_change_one_full_win_short_after_five_contexts_gets_three_more() -> None:
    q = replica_bound(MIDDLE)
    assert 0.15 < q < 0.2 and stage_one_wins(q, LOOK_2 * REPLICA_SHARE) == 5  # 4 of 5 do not pass at this bound
    four = [(0.0, 1.0)] * 4 + [(1.0, 1.0)]
    assert not judge(replicated(four), delta=LOOK_2, margin=0.02, noise=MIDDLE).passes
    assert may_replicate(replicated(four), delta=LOOK_2, noise=MIDDLE)  # one short: the second stage
    assert not may_replicate(replicated([*four[1:], (1.0, 1.0)]), delta=LOOK_2, noise=MIDDLE)  # two short: done
    verdict = judge(replicated([*four, (1.0, 1.0), (0.0, 1.0)]), delta=LOOK_2, margin=0.02, noise=MIDDLE)
    assert verdict.passes and "7 of 8 (one full win short after 5)" in verdict.describe()
    assert verdict.p_value == pytest.approx(binom_tail(5, REPLICAS, q) + (binom_tail(4, REPLICAS, q) - binom_tail(
        5, REPLICAS, q)) * binom_tail(1, EXTRA_REPLICAS, q))
    none = replicated(four + [(1.0, 1.0)] * 3)
    assert not judge(none, delta=LOOK_2, margin=0.02, noise=MIDDLE).passes
    assert not may_replicate(none, delta=LOOK_2, noise=MIDDLE)  # the design is complete


def test_a_right_change_passes_far_more_often_with_the_second_stage_at_no_more_than_eight_contexts() -> None:
    rng = np.random.default_rng(3)
    won, used = 0, list[int]()
    for _ in range(2_000):  # a real fix: its origin task fails by noise without it and passes with it 90% a context
        pairs = [(float(rng.random() < 0.1), float(rng.random() < 0.9)) for _ in range(REPLICAS + EXTRA_REPLICAS)]
        accepted, n = sequential(pairs, MIDDLE)
        won, used = won + accepted, [*used, n]
    # 5 of 5 (0.81^5 = 0.35) or 4 of 5 and then a win in 3 (0.41 x 0.99): 0.76, where the first stage alone gave 0.35
    assert won / 2_000 > 0.7 and max(used) <= REPLICAS + EXTRA_REPLICAS


def test_a_first_look_that_fails_without_harm_is_held_to_replicate() -> None:
    evidence = Evidence(tuple(Row(f"t{i:02d}", 1.0, 1.0) for i in range(8)), base_version=0)
    outcome, batch = held(evidence)
    assert outcome is Outcome.EXTEND
    (candidate,) = batch.held
    assert candidate.replicate
    assert "held to score its origin task again" in batch.decisions[0].reason


def test_a_change_that_shows_its_origin_task_answer_is_rejected_not_held_to_replicate() -> None:
    evidence = Evidence(tuple(Row(f"t{i:02d}", 1.0, 1.0) for i in range(8)), base_version=0)
    assert held(evidence)[0] is Outcome.EXTEND
    assert held(evidence, shows_origin=True)[0] is Outcome.REJECTED


def test_without_an_origin_or_on_the_last_look_a_failing_candidate_is_rejected() -> None:
    evidence = Evidence(tuple(Row(f"t{i:02d}", 1.0, 1.0) for i in range(8)), base_version=0)
    assert held(evidence, origin=None)[0] is Outcome.REJECTED
    assert held(evidence, looks=2)[0] is Outcome.REJECTED


def test_a_harmful_first_look_is_rejected_not_held() -> None:
    evidence = Evidence(tuple(Row(f"t{i:02d}", 1.0, 0.0 if i < 6 else 1.0) for i in range(10)), base_version=0)
    assert held(evidence)[0] is Outcome.REJECTED


def test_replicated_evidence_is_accepted_held_again_or_rejected() -> None:
    assert held(replicated([(0.0, 1.0)] * 3), looks=2, replicate=True)[0] is Outcome.ACCEPTED
    outcome, batch = held(replicated([(0.0, 1.0)] * 2), looks=2, replicate=True)
    assert outcome is Outcome.EXTEND and batch.held[0].replicate
    assert "held for another context" in batch.decisions[0].reason
    assert held(replicated([(1.0, 1.0), (0.0, 0.0), (1.0, 1.0)]), looks=2, replicate=True)[0] is Outcome.REJECTED


def test_a_change_with_no_effect_held_to_replicate_is_never_accepted() -> None:
    for pairs in ([(1.0, 1.0)], [(1.0, 1.0)] * 2, [(0.0, 0.0)] * 5):
        assert held(replicated(pairs), looks=2, replicate=True)[0] is not Outcome.ACCEPTED


def test_a_verdict_says_how_many_contexts_of_the_design_it_saw_and_when_fused_changes_pooled_more() -> None:
    few = judge(replicated([(0.0, 1.0)] * 3), delta=LOOK_2, margin=0.02, noise=QUIET).describe()
    pooled = judge(replicated([(0.0, 1.0)] * 12 + [(0.0, 0.0)]), delta=LOOK_2, margin=0.02, noise=QUIET).describe()
    assert f"in 3 of {REPLICAS} fresh contexts" in few
    assert f"in 13 (fused changes, {REPLICAS} each by design) fresh contexts" in pooled and " of 5 " not in pooled


NOISIER = NoiseEstimate(win_room=100.0, wins=26.0, loss_room=140.0, losses=5.0)  # a bound of about 0.14


def _decide(stage_state: AcceptanceState, evidence: Evidence, diff_key: str) -> tuple[Outcome, AcceptanceState, str]:
    stage = accept_if()
    candidate = Candidate(Diff(ARTIFACT, 0, (Op.add("key", f"{diff_key}: use method 3"),)), evidence, looks=2,
                          origin="t99", replicate=True)
    batch, state = stage.update(Batch((candidate,)), stage_state, Context({ARTIFACT: Head(0, "# s\n")},
                                                                           noise=NOISIER))
    (decision,) = batch.decisions
    return decision.outcome, state, decision.reason


def _moved(evidence: Evidence, origin: str) -> Evidence:
    """`evidence` with its replica rows moved to another origin task."""
    def moved(task_id: str) -> str:
        return task_id.replace("t99@", f"{origin}@")
    return Evidence(tuple(Row(moved(r.task_id), r.base, r.candidate) for r in evidence.rows), base_version=0,
                    replicas=tuple(moved(t) for t in evidence.replicas))


def test_the_level_is_spent_over_failed_replications_and_an_accepted_change_starts_the_count_again() -> None:
    """Tasks no proposal fixes send one junk candidate after another: after one failed the test, the next is tested
    at half the level (a 4 of 5 that passed before now needs the second stage), while a clean 5 of 5 still passes.
    An accepted change, replicated or not, starts the run's count again; the count of the origin task that failed
    stays. It survives a resume."""
    stage = accept_if()
    four = replicated([(0.0, 1.0)] * 4 + [(0.0, 0.0)])
    junk = replicated([(0.0, 1.0)] + [(0.0, 0.0)] * 4)
    p_four = binom_tail(4, REPLICAS, replica_bound(NOISIER, four))
    assert LOOK_2 * REPLICA_SHARE / 2 < p_four < LOOK_2 * REPLICA_SHARE  # passes at the level, not at half of it
    assert _decide(stage.init(), four, "a")[0] is Outcome.ACCEPTED
    outcome, state, _ = _decide(stage.init(), junk, "b")
    assert outcome is Outcome.REJECTED and dict(state.replicated) == {"t99": 1} and state.since_accepted == 1
    state = stage.load(json.loads(json.dumps(state.to_dict())))
    outcome, _, reason = _decide(state, four, "c")
    assert outcome is Outcome.EXTEND and "level is 1/2 of its share" in reason
    assert "held for another context" in reason  # one full win short at half the level: the second stage
    assert _decide(state, _moved(four, "t98"), "d")[0] is Outcome.EXTEND  # another origin, the run's count
    outcome, state, reason = _decide(state, replicated([(0.0, 1.0)] * 5), "e")
    assert outcome is Outcome.ACCEPTED and state.since_accepted == 0 and dict(state.replicated) == {"t99": 1}
    assert "level is 1/2 of its share" in reason  # a passer says the level it passed at was shared too
    assert _decide(state, _moved(four, "t98"), "f")[0] is Outcome.ACCEPTED
    assert _decide(state, four, "g")[0] is Outcome.EXTEND
    _, state, _ = _decide(state, _moved(junk, "t97"), "h")
    assert state.since_accepted == 1 and _decide(state, _moved(four, "t98"), "i")[0] is Outcome.EXTEND
    plain = Evidence(tuple(Row(f"u{i}", 0.0, 1.0) for i in range(12)), base_version=0)
    outcome, state, _ = _decide(state, plain, "j")
    assert outcome is Outcome.ACCEPTED and state.since_accepted == 0
    assert _decide(state, _moved(four, "t98"), "k")[0] is Outcome.ACCEPTED


def test_a_state_dict_from_before_the_origin_counts_still_loads() -> None:
    stage = accept_if()
    state = stage.load({"accepted": {ARTIFACT: 2}, "rejected": {}, "held": {}})
    assert dict(state.replicated) == {} and state.since_accepted == 0 and dict(state.accepted) == {ARTIFACT: 2}
    with pytest.raises(StateDictError, match="since_accepted"):
        stage.load({"since_accepted": -1})


def test_the_contexts_to_a_pass_count_the_full_wins_still_missing_in_either_stage() -> None:
    win, miss = (0.0, 1.0), (0.0, 0.0)
    assert contexts_to_pass(replicated([win] * 2), delta=LOOK_2, noise=QUIET) == 1  # 3 of 5 pass where it is quiet
    assert contexts_to_pass(replicated([win] * 3), delta=LOOK_2, noise=QUIET) == 0
    assert contexts_to_pass(replicated([miss] * 2), delta=LOOK_2, noise=QUIET) == 3
    assert contexts_to_pass(replicated([miss] * 2), delta=LOOK_2, noise=MIDDLE) is None  # 4 of 5 needed: 3 at most
    assert contexts_to_pass(replicated([win] * 4 + [miss]), delta=LOOK_2, noise=MIDDLE) == 1  # the second stage
    cases = ([win] * 2, [win] * 3, [miss, win, win], [win, miss], [win] * 4 + [miss], [win] * 4 + [(1.0, 1.0)])
    for pairs in cases:  # what it says is what the judge then finds
        for noise in (QUIET, MIDDLE, LOUD):
            need = contexts_to_pass(replicated(pairs), delta=LOOK_2, noise=noise)
            assert need is not None
            assert judge(replicated(pairs + [win] * need), delta=LOOK_2, margin=0.02, noise=noise).passes
            assert need == 0 or not judge(replicated(pairs + [win] * (need - 1)), delta=LOOK_2, margin=0.02,
                                          noise=noise).passes

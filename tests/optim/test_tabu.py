"""Tests of the `tabu` stage and `is_tabu`, and of `chain(tabu(), govern())` against the stages applied by hand."""

from __future__ import annotations

import json

import pytest

from agentgrad.core.artifact import Layer
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff, fingerprint
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.errors import StateDictError
from agentgrad.optim.base import Batch, Candidate, Context, Head, verdict
from agentgrad.optim.chain import ChainState, chain
from agentgrad.optim.governance import govern
from agentgrad.optim.tabu import TabuState, is_tabu, tabu

AID = "skills/style"
CTX = Context({AID: Head(3, ""), "harness/main": Head(0, "", Layer.L1), "safety/policy": Head(0, "", Layer.L0)})


def cand(rule: str, author: str = "w1", base: int = 0, artifact: str = AID, delta: float = 0.1) -> Candidate:
    ev = Evidence.paired({"t1": 0.5}, {"t1": 0.5 + delta})
    return Candidate(Diff(artifact, base, (Op.add("rule", rule),), author=author), ev)


def decide(c: Candidate, outcome: Outcome) -> Decision:
    return verdict(c, outcome, "acceptance", outcome.value)


@pytest.mark.parametrize("outcome", [Outcome.REJECTED, Outcome.DROPPED, Outcome.REVERTED])
def test_a_turned_down_change_is_skipped_next_step_in_other_words(outcome: Outcome) -> None:
    stage = tabu()
    original = cand("- Check the units", author="alice", base=0)
    state = stage.observe([decide(original, outcome)], stage.init(), CTX)
    again = cand("-   check the UNITS.", author="bob", base=2)
    assert again.diff.id != original.diff.id
    fresh = cand("- cite sources")
    batch, state = stage.update(Batch((again, fresh)), state, CTX)
    (decision,) = batch.decisions
    assert decision.diff_id == again.diff.id and decision.outcome is Outcome.TABU
    assert original.diff.id in decision.reason and decision.stage == "tabu"
    assert batch.candidates == (fresh,) and batch.held == ()
    assert state.hits == 1
    assert is_tabu(state, again.diff) and not is_tabu(state, fresh.diff)


@pytest.mark.parametrize("outcome", [Outcome.ACCEPTED, Outcome.STALE, Outcome.CONFLICT, Outcome.DEFERRED])
def test_a_change_that_was_not_turned_down_is_not_skipped(outcome: Outcome) -> None:
    stage = tabu()
    original = cand("- check the units")
    state = stage.observe([decide(original, outcome)], stage.init(), CTX)
    batch, state = stage.update(Batch((cand("- Check the units", author="bob"),)), state, CTX)
    assert batch.decisions == () and len(batch.candidates) == 1
    assert state.hits == 0 and not is_tabu(state, original.diff)


def test_hits_count_every_skipped_candidate_across_steps() -> None:
    stage = tabu()
    state = stage.observe([decide(cand("- a"), Outcome.REJECTED)], stage.init(), CTX)
    for n in range(1, 4):
        batch, state = stage.update(Batch((cand("- A", author=f"w{n}"),)), state, CTX)
        assert batch.candidates == ()
        assert state.hits == n


def test_memory_is_bounded_and_forgets_the_oldest_first() -> None:
    stage = tabu(max_size=2)
    rejects = [cand(f"- rule {i}") for i in range(3)]
    state = stage.init()
    for c in rejects:
        state = stage.observe([decide(c, Outcome.REJECTED)], state, CTX)
    assert [diff_id for _, diff_id in state.entries] == [rejects[1].diff.id, rejects[2].diff.id]
    assert not is_tabu(state, rejects[0].diff)
    assert is_tabu(state, rejects[1].diff) and is_tabu(state, rejects[2].diff)


def test_a_fingerprint_seen_again_keeps_its_first_diff_and_place() -> None:
    stage = tabu()
    first, other, same = cand("- a", author="x"), cand("- b"), cand("- A", author="y")
    state = stage.observe([decide(first, Outcome.REJECTED), decide(other, Outcome.REJECTED),
                           decide(same, Outcome.REVERTED)], stage.init(), CTX)
    assert state.entries == ((fingerprint(first.diff), first.diff.id), (fingerprint(other.diff), other.diff.id))


def test_state_dict_round_trips_and_behaves_the_same_after_reload() -> None:
    stage = tabu(max_size=3)
    state = stage.init()
    for i in range(4):
        state = stage.observe([decide(cand(f"- rule {i}"), Outcome.REJECTED)], state, CTX)
    _, state = stage.update(Batch((cand("- RULE 3", author="z"),)), state, CTX)
    reloaded = stage.load(json.loads(json.dumps(state.to_dict())))
    assert reloaded == state and reloaded.hits == 1
    probe = Batch(tuple(cand(f"- Rule {i}", author="q") for i in range(5)))
    assert stage.update(probe, reloaded, CTX) == stage.update(probe, state, CTX)
    more = [decide(cand("- rule 9"), Outcome.DROPPED)]
    assert stage.observe(more, reloaded, CTX) == stage.observe(more, state, CTX)


@pytest.mark.parametrize("bad", [
    {"entries": {"fp": "d1"}},
    {"entries": [["fp"]]},
    {"entries": [["fp", 3]]},
    {"entries": [["fp", "d1"], ["fp", "d2"]]},
    {"hits": -1},
    {"pardoned": ["fp", 3]},
    {"harmed": "fp"},
    {"harmed": [""]},
    {"lapse": [["fp", -1]]},
    {"lapse": [["fp"]]},
])
def test_loading_a_malformed_state_dict_raises(bad: dict[str, object]) -> None:
    with pytest.raises(StateDictError):
        TabuState.load(bad)


def test_max_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_size"):
        tabu(max_size=0)


def test_chain_of_tabu_and_govern_equals_the_stages_applied_by_hand() -> None:
    t, g = tabu(), govern()
    pipeline = chain(t, g)
    rejected = cand("- old idea")
    t_state = t.observe([decide(rejected, Outcome.REJECTED)], t.init(), CTX)
    g_state = g.init()
    c_state = ChainState(("tabu", "governance"), (t_state, g_state))
    batch_in = Batch((cand("- Old idea.", author="bob"), cand("- new idea"), cand("- x", artifact="safety/policy"),
                      cand("- h1", artifact="harness/main", delta=0.2), cand("- h2", artifact="harness/main")))

    by_chain, chained = pipeline.update(batch_in, c_state, CTX)
    mid, t_after = t.update(batch_in, t_state, CTX)
    by_hand, g_after = g.update(mid, g_state, CTX)
    assert by_chain == by_hand
    assert chained == ChainState(("tabu", "governance"), (t_after, g_after))
    assert [d.outcome for d in by_chain.decisions] == [Outcome.TABU, Outcome.REFUSED, Outcome.DEFERRED]

    final = (*by_chain.decisions, decide(by_chain.candidates[1], Outcome.FULL_CHECK))
    observed = pipeline.observe(final, chained, CTX)
    assert observed == ChainState(("tabu", "governance"),
                                  (t.observe(final, t_after, CTX), g.observe(final, g_after, CTX)))
    assert dict(observed.states[1].pending) == {"harness/main": by_chain.candidates[1].diff.id}  # type: ignore[attr-defined]
    assert pipeline.load(json.loads(json.dumps(observed.to_dict()))) == observed


def test_a_rejection_whose_evidence_leaned_in_favour_is_not_made_tabu() -> None:
    stage = tabu()
    promising = Diff("skills/s", 0, (Op.add("rule", "- promising"),))
    harmful = Diff("skills/s", 0, (Op.add("rule", "- harmful"),))
    decisions = [
        Decision(promising.id, "skills/s", Outcome.REJECTED, "accept", "thin", {"p": 0.9}, fingerprint(promising)),
        Decision(harmful.id, "skills/s", Outcome.REJECTED, "accept", "against", {"p": 0.1}, fingerprint(harmful)),
    ]
    state = stage.observe(decisions, stage.init(), Context({}))
    assert not is_tabu(state, promising)
    assert is_tabu(state, harmful)


def test_a_failed_replication_whose_contexts_still_favour_the_change_is_not_made_tabu() -> None:
    stage = tabu()
    favoured = Diff("skills/s", 0, (Op.add("rule", "- units: use method 1"),))
    spent = Diff("skills/s", 0, (Op.add("rule", "- tip: be concise"),))
    curtailed = {"p": 0.0, "wins": 4.0, "losses": 1.0, "n": 12.0}  # a curtailed replication reports p = 1
    decisions = [
        Decision(favoured.id, "skills/s", Outcome.REJECTED, "accept", "replication", {**curtailed, "favoured": 1.0},
                 fingerprint(favoured)),
        Decision(spent.id, "skills/s", Outcome.REJECTED, "accept", "replication", curtailed, fingerprint(spent)),
    ]
    state = stage.observe(decisions, stage.init(), Context({}))
    assert not is_tabu(state, favoured)
    assert is_tabu(state, spent)


def test_a_rejection_with_wins_and_no_loss_is_not_made_tabu_even_below_the_margin_one_with_a_loss_is() -> None:
    stage = tabu()
    thin = Diff("skills/s", 0, (Op.add("rule", "- dates exception: use method 9"),))
    mixed = Diff("skills/s", 0, (Op.add("rule", "- dates exception: use method 3"),))
    decisions = [  # P(gain > margin) just under 1/2 with 1 win and 0 losses: thin evidence, none against it
        Decision(thin.id, "skills/s", Outcome.REJECTED, "accept", "not significant on look 2",
                 {"p": 0.49, "n": 17.0, "wins": 1.0, "losses": 0.0}, fingerprint(thin)),
        Decision(mixed.id, "skills/s", Outcome.REJECTED, "accept", "not significant on look 2",
                 {"p": 0.31, "n": 17.0, "wins": 1.0, "losses": 1.0}, fingerprint(mixed)),
    ]
    state = stage.observe(decisions, stage.init(), Context({}))
    assert not is_tabu(state, thin)  # the base rule it needs may land later
    assert is_tabu(state, mixed)
    state = stage.load(json.loads(json.dumps(state.to_dict())))
    again = Decision("p2", "skills/s", Outcome.REJECTED, "accept", "not significant",
                     {"p": 0.49, "n": 17.0, "wins": 1.0, "losses": 0.0}, fingerprint(thin))
    state = stage.observe([again], state, Context({}))
    assert is_tabu(state, thin) and not state.pardoned  # pardoned once only: no endless re-testing of lucky wins


def test_a_rejection_resting_on_one_example_is_not_made_tabu() -> None:
    stage = tabu()
    diff = Diff("skills/s", 0, (Op.add("rule", "- screened"),))
    decision = Decision(diff.id, "skills/s", Outcome.REJECTED, "gate", "screened out", {"n": 1.0}, fingerprint(diff))
    assert not is_tabu(stage.observe([decision], stage.init(), Context({})), diff)


def test_a_harmful_verdict_on_a_change_that_won_more_than_it_lost_is_not_made_tabu_one_that_lost_more_is() -> None:
    stage = tabu()
    trade = Diff("skills/s", 0, (Op.add("rule", "- geometry exception: use method 6"),))
    loser = Diff("skills/s", 0, (Op.add("rule", "- breaks things"),))
    numbers = {"p": 0.0, "n": 9.0, "harmful": 1.0}
    decisions = [
        Decision(trade.id, "skills/s", Outcome.REJECTED, "accept", "harmful on look 2",
                 {**numbers, "wins": 6.0, "losses": 2.0}, fingerprint(trade)),
        Decision(loser.id, "skills/s", Outcome.REJECTED, "accept", "harmful",
                 {**numbers, "wins": 2.0, "losses": 2.0}, fingerprint(loser)),
    ]
    state = stage.observe(decisions, stage.init(), Context({}))
    assert not is_tabu(state, trade)  # it may come back on a later head
    assert is_tabu(state, loser)


def _at(version: int) -> Context:
    return Context({AID: Head(version, "")})


def test_a_change_turned_down_without_harm_may_be_tried_again_once_the_head_has_moved_on() -> None:
    stage = tabu(renew=3)
    original = cand("- format: use method 5")
    state = stage.observe([decide(original, Outcome.REJECTED)], stage.init(), _at(2))
    for version in (2, 3, 4):  # judged on version 2: banned while the head is within 3 versions of it
        assert is_tabu(state, cand("- FORMAT: use method 5", base=version).diff)
        batch, _ = stage.update(Batch((cand("- format: use method 5", base=version),)), state, _at(version))
        assert batch.decisions and batch.decisions[0].outcome is Outcome.TABU
    again = cand("- format: use method 5", author="bob", base=5)
    assert not is_tabu(state, again.diff)
    batch, _ = stage.update(Batch((again,)), state, _at(5))
    assert batch.decisions == () and batch.candidates == (again,)
    # turned down again on version 5: banned again, from there
    state = stage.observe([decide(again, Outcome.REJECTED)], state, _at(5))
    assert is_tabu(state, cand("- format: use method 5", base=7).diff)
    assert not is_tabu(state, cand("- format: use method 5", base=8).diff)
    assert dict(state.entries)[fingerprint(again.diff)] == again.diff.id


@pytest.mark.parametrize("outcome", [Outcome.DROPPED, Outcome.REVERTED])
def test_drops_reverts_and_a_second_harm_are_banned_for_good(outcome: Outcome) -> None:
    stage = tabu(renew=3)
    dropped = cand("- check the units")
    state = stage.observe([decide(dropped, outcome)], stage.init(), _at(0))
    harmful = cand("- guess")
    verdict_ = verdict(harmful, Outcome.REJECTED, "acceptance", "harmful", {"harmful": 1.0, "wins": 0.0,
                                                                          "losses": 4.0, "n": 8.0, "p": 0.0})
    state = stage.observe([verdict_], state, _at(0))
    assert is_tabu(state, cand("- check the units", base=100).diff)
    assert is_tabu(state, cand("- guess", base=2).diff)
    assert not is_tabu(state, cand("- guess", base=3).diff)  # the first harm was judged on the head of its day
    again = cand("- guess", base=3)
    state = stage.observe([verdict(again, Outcome.REJECTED, "acceptance", "harmful", dict(verdict_.numbers))],
                          state, _at(3))
    assert is_tabu(state, cand("- guess", base=100).diff)  # harmful twice: for good
    assert TabuState.load(state.to_dict()) == state
    assert tabu(renew=None).observe([decide(dropped, Outcome.REJECTED)], stage.init(), _at(0)).lapse == ()
    with pytest.raises(ValueError, match="renew"):
        tabu(renew=0)

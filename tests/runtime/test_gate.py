"""The acceptance gate: exact early stopping, the screen, and the score cache."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Awaitable, Callable

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgrad.core.evidence import Evidence
from agentgrad.errors import ConfigError
from agentgrad.optim.judge import judge
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.stats import posterior_summary
from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.gate import UNFOCUSED_FIRST, Gate, verdict_is_certain
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.locality import Locality
from agentgrad.runtime.scheduler import DurationEstimator, seeded_order
from agentgrad.runtime.scorecache import ScoreCache, Scored

LEVELS = (0.0, 0.5, 1.0)
PAIRS = [(b, c) for b in LEVELS for c in LEVELS]
DELTAS = sorted({c - b for b, c in PAIRS})  # every per-task effect a completion can have


def _passes(rows: list[tuple[float, float]], *, delta: float, margin: float) -> bool:
    """The acceptance rule on paired rows (what `accept_if` decides)."""
    evidence = Evidence.paired({f"t{i}": b for i, (b, _) in enumerate(rows)},
                               {f"t{i}": c for i, (_, c) in enumerate(rows)})
    return posterior_summary(evidence, delta=delta, margin=margin).passes


@settings(max_examples=80, derandomize=True, deadline=None)
@given(seen=st.lists(st.sampled_from(PAIRS), max_size=8), remaining=st.integers(0, 3),
       delta=st.sampled_from([0.05, 0.1, 0.2]), margin=st.sampled_from([0.0, 0.02, 0.1]))
def test_a_certain_verdict_is_the_verdict_of_every_completion(seen: list[tuple[float, float]], remaining: int,
                                                              delta: float, margin: float) -> None:
    wins = sum(max(c - b, 0.0) for b, c in seen)
    losses = sum(max(b - c, 0.0) for b, c in seen)
    if not verdict_is_certain(wins, losses, remaining, delta=delta, margin=margin):
        return
    verdicts = set()
    for effects in itertools.product(DELTAS, repeat=remaining):
        completion = [(0.0, d) if d >= 0 else (-d, 0.0) for d in effects]
        verdicts.add(_passes(seen + completion, delta=delta, margin=margin))
    assert len(verdicts) == 1


def test_certainty_is_exact_on_every_small_binary_case() -> None:
    certain_pass = certain_fail = 0
    for wins, losses, remaining in itertools.product(range(9), range(9), range(4)):
        if not verdict_is_certain(wins, losses, remaining, delta=0.05, margin=0.02):
            continue
        seen = [(0.0, 1.0)] * wins + [(1.0, 0.0)] * losses
        verdicts = {_passes(seen + [(0.0, 1.0)] * i + [(1.0, 0.0)] * j + [(0.0, 0.0)] * (remaining - i - j),
                            delta=0.05, margin=0.02)
                    for i in range(remaining + 1) for j in range(remaining + 1 - i)}
        assert len(verdicts) == 1, (wins, losses, remaining)
        certain_pass += verdicts == {True}
        certain_fail += verdicts == {False}
    assert certain_pass > 0 and certain_fail > 0  # both kinds of early stop were checked


def test_certainty_is_reported_for_clear_cases_and_not_for_open_ones() -> None:
    assert verdict_is_certain(12, 0, 1, delta=0.05, margin=0.02)  # passes whatever the last task does
    assert verdict_is_certain(0, 6, 3, delta=0.05, margin=0.02)  # fails even if the rest are wins
    assert not verdict_is_certain(3, 0, 4, delta=0.05, margin=0.02)


class _Scores:
    """A fake scoring port: fixed scores per (text, task), counting the calls."""

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table = table
        self.calls: Counter[str] = Counter()

    async def __call__(self, text: str, task_id: str) -> float:
        self.calls[text] += 1
        await anyio.sleep(0)
        return self.table[text][task_id]


def _scored(scores: _Scores) -> Callable[[str, str], Awaitable[Scored]]:
    """The fake scores as a score cache's loader."""
    async def compute(text: str, task_id: str) -> Scored:
        return Scored(await scores(text, task_id))
    return compute


def _gate(scores: _Scores, val: list[str], *, early_stop: bool = True, chunk: int = 4) -> Gate:
    return Gate(scores, val, GateConfig(chunk=chunk, early_stop=early_stop, max_examples=None), seed=0, margin=0.02,
                estimator=DurationEstimator())


def _evidence(gate: Gate, base: str, cand: str) -> Evidence:
    async def main() -> Evidence:
        return await gate.evidence("d1", base, 0, cand, delta=0.05)
    return anyio.run(main)


@pytest.mark.parametrize("candidate", [1.0, 0.0])
def test_early_stop_saves_calls_without_changing_the_verdict(candidate: float) -> None:
    val = [f"v{i:02d}" for i in range(40)]
    table = {"base": dict.fromkeys(val, 0.5), "cand": dict.fromkeys(val, candidate)}
    eager, full = _Scores(table), _Scores(table)
    quick = _evidence(_gate(eager, val), "base", "cand")
    whole = _evidence(_gate(full, val, early_stop=False), "base", "cand")
    assert sum(eager.calls.values()) < sum(full.calls.values()) == 80
    assert len(quick.rows) < len(whole.rows) == 40
    assert not quick.full and whole.full
    same = [posterior_summary(e, delta=0.05, margin=0.02).passes for e in (quick, whole)]
    assert same[0] == same[1] == (candidate == 1.0)


def test_a_close_call_is_evaluated_on_the_whole_split() -> None:
    val = [f"v{i:02d}" for i in range(12)]
    table = {"base": dict.fromkeys(val, 0.0), "cand": {t: float(i % 2) for i, t in enumerate(val)}}
    scores = _Scores(table)
    evidence = _evidence(_gate(scores, val), "base", "cand")
    assert len(evidence.rows) == 12 and evidence.full


def test_screen_rejects_a_candidate_that_does_not_beat_the_base_on_its_task_at_the_cost_of_one_call() -> None:
    scores = _Scores({"cand": {"train1": 0.0}, "better": {"train1": 1.0}})
    gate = _gate(scores, ["v1"])

    async def main() -> tuple[tuple[bool, object], tuple[bool, object]]:
        return (await gate.screen(("base", "cand"), 0.0, "train1"),
                await gate.screen(("base", "better"), 0.0, "train1"))

    rejected, passed = anyio.run(main)
    assert rejected == (False, {"train1": (0.0, 0.0)}) and passed == (True, {"train1": (0.0, 1.0)})
    assert scores.calls == Counter({"cand": 1, "better": 1})


def test_a_gate_that_runs_out_of_budget_raises_instead_of_returning_partial_evidence() -> None:
    val = [f"v{i}" for i in range(8)]
    calls = {"n": 0}

    async def score(text: str, task_id: str) -> float:
        calls["n"] += 1
        if calls["n"] > 5:
            raise OutOfBudget("gate_evals")
        return 0.5

    gate = Gate(score, val, GateConfig(chunk=8), seed=0, margin=0.02, estimator=DurationEstimator())
    with pytest.raises(OutOfBudget):
        _evidence(gate, "base", "cand")


def test_base_scores_are_shared_by_candidates_on_the_same_base() -> None:
    val = [f"v{i}" for i in range(6)]
    table = {"base": dict.fromkeys(val, 0.0), "a": dict.fromkeys(val, 0.0), "b": dict.fromkeys(val, 0.0)}
    scores = _Scores(table)
    cache = ScoreCache(_scored(scores))
    gate = Gate(cache.get, val, GateConfig(chunk=6, early_stop=False), seed=0, margin=0.02,
                estimator=DurationEstimator())

    async def main() -> None:
        await gate.evidence("d1", "base", 0, "a", delta=0.05)
        await gate.evidence("d2", "base", 0, "b", delta=0.05)

    anyio.run(main)
    assert scores.calls == Counter({"base": 6, "a": 6, "b": 6})


class _Slow(_Scores):
    """Scores where one task of the candidate takes far longer than the rest (a straggler)."""

    def __init__(self, table: dict[str, dict[str, float]], slow: str) -> None:
        super().__init__(table)
        self.slow = slow
        self.finished: list[str] = []

    async def __call__(self, text: str, task_id: str) -> float:
        self.calls[text] += 1
        await anyio.sleep(0.2 if (text, task_id) == ("cand", self.slow) else 0.001)
        self.finished.append(task_id)
        return self.table[text][task_id]


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 0.5, 1.0])), min_size=4, max_size=30))
def test_windowed_evidence_reaches_the_same_verdict_as_chunked(rows: list[tuple[float, float]]) -> None:
    val = [f"v{i:02d}" for i in range(len(rows))]
    table = {"base": {t: b for t, (b, _) in zip(val, rows, strict=True)},
             "cand": {t: c for t, (_, c) in zip(val, rows, strict=True)}}

    async def both() -> tuple[Evidence, Evidence]:
        chunked = await _gate(_Scores(table), val).evidence("d1", "base", 0, "cand", delta=0.05)
        windowed = await _gate(_Scores(table), val).evidence("d1", "base", 0, "cand", delta=0.05, windowed=True)
        return chunked, windowed

    chunked, windowed = anyio.run(both)
    verdicts = [posterior_summary(e, delta=0.05, margin=0.02).passes for e in (chunked, windowed)]
    assert verdicts[0] == verdicts[1]


def test_a_straggler_does_not_hold_back_the_rest_of_the_window() -> None:
    val = [f"v{i:02d}" for i in range(12)]
    table = {"base": dict.fromkeys(val, 0.0), "cand": {t: float(i % 2) for i, t in enumerate(val)}}
    first = seeded_order(val, seed=0, salt="v0")[0]  # the first task the gate starts (the order is per base version)
    scores = _Slow(table, slow=first)

    async def main() -> Evidence:
        gate = _gate(scores, val, chunk=4)
        return await gate.evidence("d1", "base", 0, "cand", delta=0.05, windowed=True)

    evidence = anyio.run(main)
    assert len(evidence.rows) == 12
    assert scores.finished[-1] == first  # it started first and finished last: every other task flowed past it


def _recheck(gate: Gate, old: Evidence, touched: set[str]) -> Evidence:
    async def main() -> Evidence:
        return await gate.reverify("d1", ("head", "cand"), 1, old, touched, delta=0.05)
    return anyio.run(main)


def test_a_recheck_scores_again_only_the_tasks_the_commit_changed_and_a_spot_check_of_the_effect() -> None:
    val = [f"v{i:02d}" for i in range(20)]
    old = Evidence.paired(dict.fromkeys(val, 0.0), {t: float(i < 8) for i, t in enumerate(val)}, base_version=0)
    head = {**dict.fromkeys(val, 0.0), "v10": 1.0}  # the commit in between fixed v10
    scores = _Scores({"head": head, "cand": {t: float(i < 8 or t == "v10") for i, t in enumerate(val)}})
    evidence = _recheck(_gate(scores, val), old, {"v10"})
    # at most 4 of the 8 wins and the touched task are scored again (it may stop once the verdict is certain)
    assert scores.calls["head"] == scores.calls["cand"] <= 5
    rows = {r.task_id: (r.base, r.candidate) for r in evidence.rows}
    assert len(rows) >= 19 and evidence.base_version == 1
    assert rows.get("v10", (1.0, 1.0)) == (1.0, 1.0) and rows["v00"] == (0.0, 1.0) and rows["v15"] == (0.0, 0.0)
    assert posterior_summary(evidence, delta=0.05, margin=0.02).passes


def test_a_recheck_fails_a_candidate_whose_effect_the_head_already_has() -> None:
    val = [f"v{i:02d}" for i in range(20)]
    effect = {t: float(i < 8) for i, t in enumerate(val)}
    old = Evidence.paired(dict.fromkeys(val, 0.0), effect, base_version=0)
    scores = _Scores({"head": effect, "cand": effect})  # the commit in between did the same thing
    evidence = _recheck(_gate(scores, val), old, set())
    assert posterior_summary(Evidence.paired(dict.fromkeys(val, 0.0), effect), delta=0.05, margin=0.02).passes
    assert not posterior_summary(evidence, delta=0.05, margin=0.02).passes
    assert 0 < scores.calls["cand"] == scores.calls["head"] < 8  # stopped once no outcome of the rest could pass


def test_a_candidate_that_changes_nothing_is_stopped_for_futility_long_before_the_end() -> None:
    val = [f"v{i:02d}" for i in range(80)]
    table = {"base": dict.fromkeys(val, 0.0), "cand": dict.fromkeys(val, 0.0)}
    quick, exact = _Scores(table), _Scores(table)
    futile = Gate(quick, val, GateConfig(chunk=4, max_examples=None), seed=0, margin=0.02,
                  estimator=DurationEstimator())
    curtailed = Gate(exact, val, GateConfig(chunk=4, futility=0.0, max_examples=None), seed=0, margin=0.02,
                     estimator=DurationEstimator())

    async def main() -> None:
        await futile.evidence("d1", "base", 0, "cand", delta=0.05)
        await curtailed.evidence("d1", "base", 0, "cand", delta=0.05)

    anyio.run(main)
    assert futile.futile_stops == 1 and curtailed.futile_stops == 0
    assert quick.calls["cand"] <= 48 < exact.calls["cand"]


def test_futility_is_refused_outside_its_range() -> None:
    with pytest.raises(ConfigError, match="futility"):
        GateConfig(futility=0.5)


class _OneSlot(_Scores):
    """Scores through one slot taken in arrival order (like `run` slots when they are scarce), noting the task of
    each call as it gets the slot."""

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        super().__init__(table)
        self.started: list[str] = []
        self._slot: anyio.Semaphore | None = None

    async def __call__(self, text: str, task_id: str) -> float:
        self._slot = self._slot or anyio.Semaphore(1)
        async with self._slot:
            self.started.append(task_id)
            return await super().__call__(text, task_id)


def test_the_first_window_starts_its_longest_calls_first_and_the_rest_follow_the_seeded_order() -> None:
    val = [f"v{i:02d}" for i in range(12)]
    table = {"base": dict.fromkeys(val, 0.0), "cand": {t: float(i % 2) for i, t in enumerate(val)}}
    order = seeded_order(val, seed=0, salt="v0")
    estimator = DurationEstimator()
    for seconds, task_id in enumerate(order[:4], start=1):  # the window's tasks, slowest last in the seeded order
        estimator.observe(task_id, float(seconds))
    scores = _OneSlot(table)
    gate = Gate(scores, val, GateConfig(chunk=4, early_stop=False), seed=0, margin=0.02, estimator=estimator)

    async def main() -> Evidence:
        return await gate.evidence("d1", "base", 0, "cand", delta=0.05, windowed=True)

    evidence = anyio.run(main)
    assert len(evidence.rows) == 12  # the same tasks are visited
    assert scores.started[:8] == [t for t in reversed(order[:4]) for _ in ("base", "cand")]
    assert scores.started[8::2] == order[4:] == scores.started[9::2]  # refilled in the seeded order


def test_a_decided_window_cancels_the_calls_still_in_flight() -> None:
    val = [f"v{i:02d}" for i in range(16)]
    stuck = seeded_order(val, seed=0, salt="v0")[0]  # in the first window
    cancelled: list[str] = []

    async def main() -> Evidence:
        never = anyio.Event()

        async def score(text: str, task_id: str) -> float:
            if task_id == stuck:
                try:
                    await never.wait()  # nobody sets it: only a cancellation ends this call
                finally:
                    cancelled.append(text)
            await anyio.sleep(0)
            return 1.0 if text == "cand" else 0.0

        gate = Gate(score, val, GateConfig(chunk=4), seed=0, margin=0.02, estimator=DurationEstimator())
        with anyio.fail_after(5):
            return await gate.evidence("d1", "base", 0, "cand", delta=0.05, windowed=True)

    evidence = anyio.run(main)
    assert stuck not in {r.task_id for r in evidence.rows} and not evidence.full
    assert posterior_summary(evidence, delta=0.05, margin=0.02).passes  # decided without it
    assert sorted(cancelled) == ["base", "cand"]  # both of its calls were cancelled, not left running


def test_under_a_call_budget_a_decided_window_lets_its_calls_finish_and_keeps_their_rows() -> None:
    """Calls cut off are paid for with nothing to show: with `finish`, a window holds at most that many tasks, and
    once an exact stop decides, the calls in flight finish and their rows are kept (the verdict is the same)."""
    val = [f"v{i:02d}" for i in range(16)]
    slow = seeded_order(val, seed=0, salt="v0")[0]  # in the first window: the last to land
    most: dict[int | None, int] = {}

    async def main(finish: int | None) -> tuple[Evidence, list[str]]:
        landed: list[str] = []
        in_flight = [0]

        async def score(text: str, task_id: str) -> float:
            in_flight[0] += 1
            most[finish] = max(most.get(finish, 0), in_flight[0])
            try:
                await anyio.sleep(0.05 if task_id == slow else 0)
            finally:
                in_flight[0] -= 1
            landed.append(task_id)
            return 1.0 if text == "cand" else 0.0

        gate = Gate(score, val, GateConfig(chunk=4), seed=0, margin=0.02, estimator=DurationEstimator(),
                    finish=finish)
        with anyio.fail_after(5):
            return await gate.evidence("d1", "base", 0, "cand", delta=0.05, windowed=True), landed

    (cut, cut_landed), (kept, kept_landed) = anyio.run(main, None), anyio.run(main, 3)
    assert slow not in {r.task_id for r in cut.rows} and slow not in cut_landed  # cancelled, as before
    assert slow in {r.task_id for r in kept.rows} and kept_landed.count(slow) == 2  # finished, row kept
    assert most == {None: 8, 3: 6}  # a window of `chunk` tasks, or of `finish` (two calls a task)
    assert posterior_summary(kept, delta=0.05, margin=0.02).passes == posterior_summary(cut, delta=0.05,
                                                                                        margin=0.02).passes


def test_a_cached_base_score_is_read_not_awaited_and_only_the_candidate_is_scored() -> None:
    val = [f"v{i}" for i in range(6)]
    table = {"base": dict.fromkeys(val, 0.0), "cand": dict.fromkeys(val, 1.0)}
    scores = _Scores(table)
    cache = ScoreCache(_scored(scores))
    for task in val:
        cache.put("base", task, 0.0)  # e.g. from rollouts on the head
    asked: list[tuple[str, str]] = []

    async def score(text: str, task_id: str) -> float:
        asked.append((text, task_id))
        return await cache.get(text, task_id)

    gate = Gate(score, val, GateConfig(chunk=6, early_stop=False), seed=0, margin=0.02,
                estimator=DurationEstimator(), peek=cache.peek)

    async def main() -> Evidence:
        return await gate.evidence("d1", "base", 0, "cand", delta=0.05, windowed=True)

    evidence = anyio.run(main)
    assert {r.task_id: (r.base, r.candidate) for r in evidence.rows} == dict.fromkeys(val, (0.0, 1.0))
    assert sorted(asked) == sorted(("cand", t) for t in val)  # the base was never asked for
    assert scores.calls == Counter({"cand": 6}) and cache.hits == 6



def test_another_look_keeps_the_evidence_so_far_and_scores_as_many_tasks_again() -> None:
    val = [f"v{i:02d}" for i in range(40)]
    scores = _Scores({"base": dict.fromkeys(val, 0.0), "cand": {t: float(i % 3 == 0) for i, t in enumerate(val)}})
    gate = Gate(scores, val, GateConfig(chunk=4, max_examples=8, early_stop=False), seed=0, margin=0.02,
                estimator=DurationEstimator())

    async def main() -> tuple[Evidence, Evidence]:
        first = await gate.evidence("d1", "base", 0, "cand", delta=0.035)
        again = await gate.reverify("d1", ("base", "cand"), 0, first, set(), delta=0.015, looks=2)
        return first, again

    first, again = anyio.run(main)
    assert len(first.rows) == 8 and len(again.rows) == 16
    assert set(first.rows) <= set(again.rows)  # nothing of the first look is lost or re-drawn
    assert scores.calls["cand"] == 16  # the first look's tasks were not scored again


def test_a_first_look_with_nothing_like_its_origin_is_a_short_harm_check_unless_it_shows_gain() -> None:
    inputs = {"lonely": "xylophone quasar"} | {f"r{i}": f"refund order {i} parcel" for i in range(20)}
    val = [t for t in inputs if t != "lonely"]
    table = {"base": {t: 0.0 for t in inputs}, "tie": {t: 0.0 for t in inputs}, "win": {t: 1.0 for t in inputs}}

    def gate(early_stop: bool = True) -> Gate:
        config = GateConfig(chunk=8, max_examples=24, futility=0.0, early_stop=early_stop)
        return Gate(_Scores(table), val, config, seed=0, margin=0.02, estimator=DurationEstimator(),
                    locality=Locality(inputs))

    async def main() -> tuple[Evidence, ...]:
        return (await gate().evidence("d1", "base", 0, "tie", delta=0.05, origin="lonely"),
                await gate().evidence("d2", "base", 0, "win", delta=0.05, origin="lonely"),
                await gate(early_stop=False).evidence("d3", "base", 0, "tie", delta=0.05, origin="lonely"))

    harm_check, gain, strict = anyio.run(main)
    assert not harm_check.focus and len(harm_check.rows) == UNFOCUSED_FIRST  # nothing to win on: 8 tasks
    assert len(gain.rows) > UNFOCUSED_FIRST  # wins on those 8: the rest of the plan follows
    assert len(strict.rows) == len(val)  # no early stops asked for: the whole plan


def test_a_focused_plan_checks_harm_on_a_sample_of_the_other_tasks() -> None:
    inputs = {"origin": "refund order parcel"} | {f"r{i}": f"refund order {i} parcel" for i in range(10)} | \
        {f"x{i}": f"weather forecast {i} tomorrow" for i in range(30)}
    val = [t for t in inputs if t != "origin"]
    table = {"base": {t: 0.0 for t in inputs}, "cand": {t: float(t.startswith("r")) for t in inputs}}

    def evidence(harm_sample: int | None) -> Evidence:
        config = GateConfig(chunk=8, max_examples=24, early_stop=False, focus=8, harm_sample=harm_sample)
        gate = Gate(_Scores(table), val, config, seed=0, margin=0.02, estimator=DurationEstimator(),
                    locality=Locality(inputs))
        return anyio.run(lambda: gate.evidence("d1", "base", 0, "cand", delta=0.05, origin="origin"))

    sampled, whole = evidence(8), evidence(None)
    assert len(sampled.focus) == 8 and all(t.startswith("r") for t in sampled.focus)
    assert len([r for r in sampled.rows if r.task_id not in sampled.focus]) == 8  # the harm sample
    assert len(whole.rows) == 24  # no sample: up to max_examples in all
    with pytest.raises(ConfigError, match="harm_sample"):
        GateConfig(harm_sample=0)


def test_a_focus_too_small_to_ever_show_a_gain_at_the_runs_noise_gives_way_to_every_task() -> None:
    inputs = {"origin": "refund order parcel"} | {f"r{i}": f"refund order {i} parcel" for i in range(3)} | \
        {f"x{i}": f"weather forecast {i} tomorrow" for i in range(20)}
    val = [t for t in inputs if t != "origin"]
    table = {"base": {t: 0.0 for t in inputs}, "cand": {t: 1.0 for t in inputs}}  # a change that helps everywhere

    def evidence(noise: NoiseEstimate) -> Evidence:
        config = GateConfig(chunk=8, max_examples=12, focus=8, harm_sample=8)
        gate = Gate(_Scores(table), val, config, seed=0, margin=0.02, estimator=DurationEstimator(),
                    locality=Locality(inputs), noise=lambda: noise)
        return anyio.run(lambda: gate.evidence("d1", "base", 0, "cand", delta=0.035, origin="origin"))

    quiet, loud = evidence(NoiseEstimate()), evidence(NoiseEstimate(win_room=9.0, wins=6.0))
    assert sorted(quiet.focus) == ["r0", "r1", "r2"]  # three wins there can pass the calibrated test
    # at that noise no test passes on three tasks: rather than a verdict with no task scored, the gain is looked
    # for on every task of the plan
    assert not loud.focus and len(loud.rows) >= 5
    assert judge(loud, delta=0.035, margin=0.02, noise=NoiseEstimate(win_room=9.0, wins=6.0)).passes


def test_a_focus_task_the_base_fails_where_an_earlier_head_solved_it_is_not_a_focus_task() -> None:
    """The head's own noise: a junk tip was committed on 4 wins in 8 focus tasks, each a task of a ruled category
    that this head alone failed (earlier heads solved it) and that the tip's fresh text solved again."""
    inputs = {**{f"d{i}": f"what weekday is the date {i} march of year {2000 + i}" for i in range(8)},
              **{f"g{i}": f"area of a triangle with sides {i} and {i + 2} in a square grid" for i in range(8)}}
    unlucky = {"d1", "d2"}  # the base fails them by its noise; an earlier head solved them
    fixed = {"d3"}  # the base fails it, and so did every earlier head: a real failure the change fixes

    async def score(text: str, task_id: str) -> float:
        return 0.0 if text == "base" and task_id in unlucky | fixed else 1.0

    def earlier(text: str, task_id: str) -> float | None:
        return 1.0 if task_id in unlucky else 0.0 if task_id in fixed else None

    def gate(hook: Callable[[str, str], float | None] | None) -> Gate:
        return Gate(score, list(inputs), GateConfig(chunk=4, early_stop=False, focus=7), seed=0,
                    margin=0.02, estimator=DurationEstimator(), locality=Locality(inputs), earlier=hook)

    async def main(hook: Callable[[str, str], float | None] | None) -> Evidence:
        return await gate(hook).evidence("p1", "base", 0, "cand", delta=0.05, origin="d0")
    plain, checked = anyio.run(main, None), anyio.run(main, earlier)
    assert set(plain.focus) >= unlucky | fixed and {r.task_id for r in plain.rows} == set(inputs) - {"d0"}
    assert "d3" in checked.focus and not unlucky & set(checked.focus)  # no gain is looked for there
    assert checked.rows == plain.rows  # the same tasks scored: only where the gain is looked for changed

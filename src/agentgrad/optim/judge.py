"""The acceptance test on one candidate's evidence: a gain where the change should act, and no harm elsewhere.

The evidence of a candidate scored by the gate has *focus* rows (the tasks most like its origin task, where a real
effect shows) and the rest (a random sample of other tasks). The test has two parts.

Gain, on the focus rows (all rows when fewer than `MIN_FOCUS` are marked), by one of two tests:
- *calibrated* (when the evidence says so, `Evidence.calibrated`, and the run has a noise estimate): under the
  null that the change does nothing, each task the base failed turns into a win with at most the noise rate q, so
  the wins W on R chances are at most Binomial(R, q); the p-value is P(Bin(R, q) >= W − L), the net wins (a loss
  takes a win back; still valid, as W − L <= W), and the mean net effect on the gain rows must reach the margin.
  Ties count: 4 wins on 4 failed tasks when q is 0.05 has p ~ 6e-6, where the sign test gives 1/16.
- *sign test* otherwise (`stats.prob_improvement` with its prior): wins against losses among the differing rows,
  valid whatever the noise.
Which of the two applies the gate decides when it plans a look, before any of the candidate's scores are known
(`prefer_calibrated`: the test that would need fewer wins on the planned gain rows at the current noise bound), so
each keeps its false-accept bound: at most δ when the change does nothing (given the bound on q holds). The
calibrated test also needs the base to fail at least half of the gain rows (`FAILING`, a fact about the base, not
the candidate): where the base already solves most tasks like the origin, its few failures are likely its own
unlucky draws, which any edit may turn back into wins, so the noise rate measured elsewhere does not apply there
and the sign test decides.

No harm, on all rows: the losses on the tasks the base solved must not be significantly more than noise makes
(P(Bin(S, r) >= L) >= `HARM` with r an upper credible bound of the noise loss rate, so a lone loss is not taken
for harm before the noise is measured; and where the base solves so few tasks that they may be its luck, more:
`null_loss_rate`), and the wins must outnumber the losses. An exact tie or a
change with no effect never passes: it has no win.

Replication, for a change whose gain cannot show on the tasks there are (an origin task with no like task in the
pool, a rare category): the evidence carries *replica* rows (`Evidence.replicas`), its origin task scored again on
fresh contexts (`runtime.parking`: later heads, or the head with another change), in none of which a score was
chosen for failing. Under the null each is a full win (base 0, candidate 1) with chance at most q_r, an upper
credible bound of the noise's win rate per far row (never above 1/4: with base and candidate equally good,
p(1 − p) <= 1/4), independently across contexts. The far rows pool tasks that are solved or failed for good; a task
that passes now and then by itself (a category with no rule yet, where the model guesses right a fifth of the time)
makes wins at p(1 − p), its own pass chance p, well above them: a junk tip once won 3 of 5 contexts on such an
origin, the base passing in the other two. So q_r is at least p(1 − p) for p the base's pass rate in the candidate's
contexts, with the run's q_r as its prior mean at the weight of `ORIGIN_PRIOR` contexts (no base pass there: q_r
as it was). The design is `REPLICAS` contexts and the p-value of W full wins
is P(Bin(REPLICAS, q_r) >= W), tested at `REPLICA_SHARE` of the look's δ and with at least `REPLICA_WINS` full wins
asked for however quiet the noise (the change acts on one task: little to gain, so little risk is worth taking, and
the share keeps junk out in practice, not only in the bound). Evidence accumulates instead of starting again: a
change one full win short of passing after the `REPLICAS` contexts, where passing asks for more than
`REPLICA_WINS` of them (q_r above about 0.06, where a real fix that wins 80-90% of its contexts often misses one),
gets `EXTRA_REPLICAS` more, a second stage with the stagewise p-value P(W_1 >= w) + P(W_1 = w − 1) P(Bin(3, q_r) >=
W_2), w being the first stage's pass; with the first stage's pass ranked above any of the second, the two stages
together keep the bound. The runtime may stop early both ways (curtailment: the test already passes, or can no
longer pass in either stage), which leaves the test exact. A run may also have no fresh context left for a
candidate before its design is done (a short run with few versions), or no call left to pay for one: its last look
is then a *closing* one, the design ending at the contexts it has, the stage it ends in cut there (W full wins in n <
`REPLICAS` contexts: P(Bin(n, q_r) >= W)). When the design ends depends on the texts the run made and the calls it
had, not on the candidate's scores (when calls are short, `runtime.split.triage` gives the contexts left to those
nearest a pass, which holds back only those less likely to pass), and any pass of the full design at an earlier
look passes the cut one too, so the bound holds. The no-harm check is as above,
on all rows, but wins need not outnumber losses there: the change acts on one task, and a loss or two elsewhere is
what noise makes (the harm check bounds it).

`judge` works on `RowTally` counts, so the gate can ask how the verdict would fall in the best and the worst case of
the tasks it has not scored yet (`certain`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scipy.special import betainc

from agentgrad.core.evidence import Evidence, Row, replica_origin
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.stats import SIGN_TEST_PRIOR, prob_improvement

MIN_FOCUS = 2  # fewer focus rows than this: the gain is looked for on all rows
HARM = 0.05  # losses this improbable under the noise alone count as harm
FAILING = 0.5  # the calibrated test needs the base to fail at least this share of the gain rows (else: sign test)
REPLICA_BOUND = 0.25  # the most a fresh context can make a win of a change with no effect: p(1 - p) <= 1/4
REPLICAS = 5  # the replication test's design: the origin task scored in this many fresh contexts ...
REPLICA_WINS = 3  # ... of which at least this many must be full wins, however low the noise
EXTRA_REPLICAS = 3  # ... and a change one full win short of passing after them gets this many more (stage two)
REPLICA_SHARE = 0.2  # ... tested at this share of the look's δ: a change that acts on one task has little to gain
ORIGIN_PRIOR = 15.0  # the weight, in contexts, of the run's noise as the prior of the origin task's own pass rate
TIE = 1e-9  # wins and losses closer than this (relative) are a tie: sums of fractional scores carry round-off


def binom_tail(k: float, n: float, q: float) -> float:
    """P(X >= k) for X ~ Binomial(n, q), continued to fractional k and n by the regularized incomplete beta."""
    if k <= 0:
        return 1.0
    if k > n + 1e-9 or q <= 0:
        return 0.0
    if q >= 1:
        return 1.0
    return float(betainc(k, max(n - k, 0.0) + 1.0, q))


@dataclass(frozen=True)
class RowTally:
    """Counts over some rows: summed wins and losses, room to win (1 − base) and to lose (base), row count."""

    wins: float = 0.0
    losses: float = 0.0
    win_room: float = 0.0
    loss_room: float = 0.0
    n: int = 0

    @classmethod
    def of(cls, rows: Iterable[Row]) -> RowTally:
        wins = losses = win_room = loss_room = 0.0
        n = 0
        for row in rows:
            wins, losses = wins + max(row.delta, 0.0), losses + max(-row.delta, 0.0)
            win_room, loss_room, n = win_room + 1.0 - row.base, loss_room + row.base, n + 1
        return cls(wins, losses, win_room, loss_room, n)

    def minus(self, other: RowTally) -> RowTally:
        """These counts without those of `other`, rows of these (the rest of the rows)."""
        return RowTally(max(self.wins - other.wins, 0.0), max(self.losses - other.losses, 0.0),
                        max(self.win_room - other.win_room, 0.0), max(self.loss_room - other.loss_room, 0.0),
                        max(self.n - other.n, 0))

    def plus(self, *, wins: int = 0, losses: int = 0) -> RowTally:
        """With `wins` rows going 0 -> 1 and `losses` rows going 1 -> 0 added."""
        return RowTally(self.wins + wins, self.losses + losses, self.win_room + wins, self.loss_room + losses,
                     self.n + wins + losses)


@dataclass(frozen=True)
class Judgement:
    """The verdict of the test and the figures behind it (`describe` says them in a sentence)."""

    passes: bool
    test: str
    p_value: float
    delta: float
    margin: float
    gain: RowTally
    total: RowTally
    focused: bool
    noise_win: float
    harm_p: float
    pooled: bool = False  # replicas of several origin tasks (a fused change): one pooled stage
    closed: int | None = None  # a closing look: the design ended at this many contexts

    @property
    def harmful(self) -> bool:
        return self.harm_p < HARM

    def numbers(self) -> dict[str, float]:
        """The figures as a decision's `numbers` (p: the confidence 1 − p-value, passing above `threshold`)."""
        return {"wins": self.total.wins, "losses": self.total.losses, "n": float(self.total.n),
                "p": 1.0 - self.p_value, "threshold": 1.0 - self.delta, "delta": self.delta, "margin": self.margin,
                "focus_wins": self.gain.wins, "focus_losses": self.gain.losses, "focus_n": float(self.gain.n),
                "noise_win": self.noise_win, "harm_p": self.harm_p, "calibrated": float(self.test == "calibrated"),
                "mean_delta": (self.total.wins - self.total.losses) / self.total.n if self.total.n else 0.0}

    def describe(self) -> str:
        where = f"{self.gain.n} focus tasks" if self.focused else f"{self.gain.n} tasks"
        if self.test == "replicated":
            done = (f"{self.gain.n}" if self.closed
                    else f"{self.gain.n} of {REPLICAS}" if self.gain.n <= REPLICAS  # fused: pooled contexts
                    else f"{self.gain.n} (fused changes, {REPLICAS} each by design)" if self.pooled
                    else f"{self.gain.n} of {REPLICAS + EXTRA_REPLICAS} (one full win short after {REPLICAS})")
            closed = f", all the run had (a closing look; {REPLICAS} by design)" if self.closed else ""
            gain = (f"replication of its origin task in {done} fresh contexts{closed}: "
                    f"{self.gain.wins:.4g} wins, {self.gain.losses:.4g} losses, against noise <= {self.noise_win:.3f}"
                    f" a context: p = {self.p_value:.2g} vs < {self.delta:.4g} needed")
        elif self.test == "pooled":  # `optim.pooled`
            gain = (f"replication across the proposals of this change: {self.gain.wins:.4g} full wins in "
                    f"{self.gain.n} distinct contexts against noise <= {self.noise_win:.3f} a context: e "
                    f"{'<= 1' if self.p_value >= 1 else f'= {1 / self.p_value:.3g}'} vs >= {1 / self.delta:.4g} needed")
        elif self.test == "calibrated":
            gain = (f"{self.gain.wins:.4g} wins on {where} ({self.gain.win_room:.4g} the base failed) against noise "
                    f"<= {self.noise_win:.3f}: p = {self.p_value:.2g} vs < {self.delta:.4g} needed")
        else:
            gain = (f"sign test on {where}: {self.gain.wins:.4g} wins, {self.gain.losses:.4g} losses, P(gain > "
                    f"{self.margin:g}) = {1 - self.p_value:.4f} vs > {1 - self.delta:.4f} needed")
        harm = f"; harm: {self.total.losses:.4g} losses on {self.total.loss_room:.4g} solved (p = {self.harm_p:.2g})"
        return f"{gain}{harm}; {self.total.wins:.4g} wins, {self.total.losses:.4g} losses, n={self.total.n}"


def judge_tallies(gain: RowTally, total: RowTally, *, focused: bool, delta: float, margin: float,
                  noise: NoiseEstimate | None, prior: tuple[float, float] = SIGN_TEST_PRIOR,
                  calibrated: bool = False) -> Judgement:
    """The test on counts (see the module doc); without a noise estimate, the sign test and no harm check beyond
    it."""
    q = noise.win_upper() if noise is not None else 1.0
    if calibrated and noise is not None and gain.win_room >= FAILING * gain.n:
        # the net wins: P(W - L >= k) <= P(W >= k) under the null: still valid
        net = gain.wins - gain.losses
        big_enough = gain.n > 0 and net / gain.n >= margin  # the margin: a least mean effect on the gain rows
        test, p_value = "calibrated", binom_tail(net if net > TIE and big_enough else 0.0, gain.win_room, q)
    else:
        test, p_value = "sign", 1.0 - prob_improvement(gain.wins, gain.losses, margin=margin, prior=prior)
    harm_p = 1.0
    if noise is not None and total.losses > 0:
        harm_p = binom_tail(total.losses, total.loss_room, null_loss_rate(noise, total.minus(gain) if focused
                                                                           else total))
    passes = p_value < delta and harm_p >= HARM and total.wins - total.losses > TIE * max(1.0, total.wins)
    return Judgement(passes, test, p_value, delta, margin, gain, total, focused, q, harm_p)


def null_loss_rate(noise: NoiseEstimate, sample: RowTally) -> float:
    """The rate at which a change with no effect loses tasks the base solved, as the harm check's null: the noise's
    loss bound r on tasks the base solves for good, and 1 − q on those it solved only by luck (a task it fails but
    for the noise of its own text, q the win bound: any edit draws that noise again). Of the S rows of `sample` the
    base solved, about q F / (1 − q) are such when it failed F (`sample`: rows not chosen for being like the origin,
    so F / S is the base's own ratio); their share m at most 1. The rate is m (1 − q) + (1 − m) r, and r at least.
    A weak head solves few tasks, most of them by luck: two of them lost read as noise, not as harm."""
    r = noise.loss_upper()
    if sample.loss_room <= 0:
        return r
    q = noise.win_upper()
    lucky = min(1.0, q * sample.win_room / ((1.0 - q) * sample.loss_room))
    return max(r, lucky * (1.0 - q) + (1.0 - lucky) * r)


def replica_bound(noise: NoiseEstimate | None, evidence: Evidence | None = None) -> float:
    """q_r of the replication test: the noise's win rate bound per far row, at most `REPLICA_BOUND`; with
    `evidence`, at least p(1 − p) for p the origin task's own chance to pass without the change, estimated from the
    base's scores in its fresh contexts with q_r as the prior mean at the weight of `ORIGIN_PRIOR` contexts (module
    doc: a task that passes now and then by itself makes wins at a rate of its own, which the far rows, mostly
    solved or failed for good, do not show)."""
    if evidence is None or not evidence.replicas:
        return origin_bound(noise, [])
    rows = {r.task_id: r for r in evidence.rows}
    return origin_bound(noise, [rows[t].base for t in evidence.replicas if t in rows])


def origin_bound(noise: NoiseEstimate | None, bases: Sequence[float]) -> float:
    """`replica_bound` given the base's scores in the origin task's contexts (`bases`; none: the run's bound)."""
    q = REPLICA_BOUND if noise is None else min(REPLICA_BOUND, noise.row_win_upper())
    p = (q * ORIGIN_PRIOR + sum(bases)) / (ORIGIN_PRIOR + len(bases))
    return min(REPLICA_BOUND, max(q, p * (1.0 - p)))


@dataclass(frozen=True)
class Replicas:
    """Full wins of a candidate's replica rows in the two stages of the design: `first` in its first `REPLICAS`
    contexts, `extra` in those after (None before the second stage), `n` contexts in all; `pooled` when the rows
    come from several origin tasks (a fused change), whose wins are pooled in one stage."""

    first: int
    extra: int | None
    n: int
    pooled: bool

    @classmethod
    def of(cls, evidence: Evidence, *, more: int = 0) -> Replicas:
        """The counts of `evidence`, with `more` full wins after its contexts when given (what-if)."""
        rows = {r.task_id: r for r in evidence.rows}
        won = [rows[t].base <= TIE and rows[t].candidate >= 1.0 - TIE for t in evidence.replicas if t in rows]
        won += [True] * more
        pooled = len({replica_origin(t) for t in evidence.replicas}) > 1 or len(won) > REPLICAS + EXTRA_REPLICAS
        if pooled or len(won) <= REPLICAS:
            return cls(sum(won), None, len(won), pooled)
        return cls(sum(won[:REPLICAS]), sum(won[REPLICAS:]), len(won), pooled)


def may_close(contexts: int) -> bool:
    """True if a candidate replicating in `contexts` contexts may take its closing look once no context can be paid
    for: fewer than `REPLICA_WINS` can never pass."""
    return contexts >= REPLICA_WINS


def stage_one_wins(q: float, alpha: float) -> int:
    """The fewest full wins in `REPLICAS` contexts that pass at `alpha` (at least `REPLICA_WINS`; `REPLICAS` + 1
    when none does): one fewer is the second stage's way in."""
    return next((w for w in range(REPLICA_WINS, REPLICAS + 1) if binom_tail(w, REPLICAS, q) < alpha), REPLICAS + 1)


def replica_p(first: int, extra: int | None = None, *, q: float, alpha: float,
              closed: int | None = None) -> float:
    """The p-value of `first` full wins in the first `REPLICAS` contexts and `extra` in the `EXTRA_REPLICAS` of
    the second stage (None: not entered), in the stagewise order: a pass in the first stage ranks above any in the
    second. The second stage is entered one win short of the first stage's pass only, and only where that pass
    asks for more than `REPLICA_WINS` (noise loud enough that a real fix may miss a context), so its p-value is the
    first stage's chance to pass plus the chance to land one short there and win `extra` of the rest. `closed`:
    the design ends after this many contexts in all (a closing look, module doc), the stage it ends in cut there."""
    first_n = REPLICAS if closed is None else min(REPLICAS, closed)
    extra_n = EXTRA_REPLICAS if closed is None else max(0, closed - REPLICAS)
    one = binom_tail(first, first_n, q) if first >= REPLICA_WINS else 1.0
    if extra is None or one < alpha:
        return one
    if first < REPLICA_WINS or first + 1 != stage_one_wins(q, alpha):
        return 1.0
    short = binom_tail(first, REPLICAS, q) - binom_tail(first + 1, REPLICAS, q)
    return binom_tail(first + 1, REPLICAS, q) + short * binom_tail(extra, extra_n, q)


def may_replicate(evidence: Evidence, *, delta: float, noise: NoiseEstimate | None) -> bool:
    """True while some outcome of the contexts left could still pass at the look's `delta` (of which the test
    takes `REPLICA_SHARE`): in the first `REPLICAS` contexts, or, one full win short after them, in the
    `EXTRA_REPLICAS` of the second stage. Pooled (fused) evidence gets no more contexts."""
    got, q, alpha = Replicas.of(evidence), replica_bound(noise, evidence), delta * REPLICA_SHARE
    if got.pooled:
        return got.n < REPLICAS and replica_p(got.first + REPLICAS - got.n, q=q, alpha=alpha) < alpha
    short = stage_one_wins(q, alpha) - 1
    second = REPLICA_WINS <= short <= REPLICAS and replica_p(short, EXTRA_REPLICAS, q=q, alpha=alpha) < alpha
    if got.n < REPLICAS:
        best = got.first + REPLICAS - got.n
        return replica_p(best, q=q, alpha=alpha) < alpha or (second and best >= short)
    if got.n < REPLICAS + EXTRA_REPLICAS and got.first == short and second:
        extra = (got.extra or 0) + REPLICAS + EXTRA_REPLICAS - got.n
        return replica_p(got.first, extra, q=q, alpha=alpha) < alpha
    return False


def contexts_to_pass(evidence: Evidence, *, delta: float, noise: NoiseEstimate | None) -> int | None:
    """The fewest further contexts, each a full win, after which the replication test on `evidence` passes at the
    look's `delta` (None: none does): how near a pass a held candidate is."""
    q, alpha = replica_bound(noise, evidence), delta * REPLICA_SHARE
    for more in range(max(0, REPLICAS + EXTRA_REPLICAS - len(evidence.replicas)) + 1):
        got = Replicas.of(evidence, more=more)
        if got.pooled and got.n > REPLICAS:
            return None
        if replica_p(got.first, got.extra, q=q, alpha=alpha) < alpha:
            return more
    return None


def judge_replicas(evidence: Evidence, *, delta: float, margin: float, noise: NoiseEstimate | None,
                   closing: bool = False) -> Judgement:
    """The replication test (module doc) on evidence with replica rows, at `REPLICA_SHARE` of the look's `delta`;
    `closing`: its last look, the design ending at the contexts the evidence has (module doc)."""
    delta *= REPLICA_SHARE
    gain, total = RowTally.of(evidence.replica_rows()), RowTally.of(evidence.rows)
    got, q = Replicas.of(evidence), replica_bound(noise, evidence)
    closed = got.n if closing and not got.pooled else None
    p_value = replica_p(got.first, got.extra, q=q, alpha=delta, closed=closed)
    harm_p = 1.0
    if noise is not None and total.losses > 0:
        harm_p = binom_tail(total.losses, total.loss_room, null_loss_rate(noise, total.minus(gain)))
    passes = p_value < delta and harm_p >= HARM  # the gain is on one task: elsewhere only harm is looked for
    return Judgement(passes, "replicated", p_value, delta, margin, gain, total, True, q, harm_p, got.pooled, closed)


def wins_needed(chances: int, *, delta: float, margin: float, noise: NoiseEstimate | None,
                prior: tuple[float, float] = SIGN_TEST_PRIOR, calibrated: bool = False) -> int | None:
    """The least number of wins, with no loss, on `chances` tasks the base failed (the only rows) that passes the
    test; None if no number up to `chances` does. The sign test at δ = 0.035 and margin 0.02 needs 5 (from 5
    tasks on); the calibrated one with noise bound q the least w with P(Bin(n, q + margin) >= w) < δ."""
    for wins in range(1, chances + 1):
        tally = RowTally(float(wins), 0.0, float(chances), 0.0, chances)
        if judge_tallies(tally, tally, focused=False, delta=delta, margin=margin, noise=noise, prior=prior,
                         calibrated=calibrated).passes:
            return wins
    return None


def prefer_calibrated(planned: int, *, delta: float, margin: float, noise: NoiseEstimate | None,
                      prior: tuple[float, float] = SIGN_TEST_PRIOR) -> bool:
    """True when, on `planned` gain rows, the calibrated test would commit on fewer wins than the sign test."""
    if noise is None or planned < 1:
        return False
    options = {"delta": delta, "margin": margin, "noise": noise, "prior": prior}
    calibrated = wins_needed(planned, calibrated=True, **options)  # type: ignore[arg-type]
    sign = wins_needed(planned, calibrated=False, **options)  # type: ignore[arg-type]
    return calibrated is not None and (sign is None or calibrated <= sign)


def split(evidence: Evidence) -> tuple[RowTally, RowTally, bool, set[str]]:
    """(gain tally, total tally, focused, the gain rows' task ids) of `evidence`."""
    focus = set(evidence.focus)
    focused = len(focus) >= MIN_FOCUS
    gain_rows = [r for r in evidence.rows if r.task_id in focus] if focused else list(evidence.rows)
    return RowTally.of(gain_rows), RowTally.of(evidence.rows), focused, {r.task_id for r in gain_rows}


def judge(evidence: Evidence, *, delta: float, margin: float, noise: NoiseEstimate | None,
          prior: tuple[float, float] = SIGN_TEST_PRIOR, closing: bool = False) -> Judgement:
    """The test on one candidate's evidence (the replication test when it has replica rows; `closing`: its last
    look, `judge_replicas`)."""
    if evidence.replicas:
        return judge_replicas(evidence, delta=delta, margin=margin, noise=noise, closing=closing)
    gain, total, focused, _ = split(evidence)
    return judge_tallies(gain, total, focused=focused, delta=delta, margin=margin, noise=noise, prior=prior,
                         calibrated=evidence.calibrated)


def certain(gain: RowTally, total: RowTally, *, focused: bool, gain_left: int, other_left: int, delta: float,
            margin: float, noise: NoiseEstimate | None, prior: tuple[float, float] = SIGN_TEST_PRIOR,
            calibrated: bool = False) -> bool:
    """True when no outcome of the tasks not scored yet (`gain_left` of them would count for the gain, `other_left`
    only for harm) can change whether the test passes."""
    left = gain_left + other_left

    def passes(g: RowTally, t: RowTally) -> bool:
        return judge_tallies(g, t, focused=focused, delta=delta, margin=margin, noise=noise, prior=prior,
                             calibrated=calibrated).passes

    if passes(gain.plus(losses=gain_left), total.plus(losses=left)):
        return True
    return not passes(gain.plus(wins=gain_left), total.plus(wins=left))


__all__ = ["EXTRA_REPLICAS", "HARM", "MIN_FOCUS", "REPLICAS", "REPLICA_BOUND", "REPLICA_SHARE", "REPLICA_WINS",
           "Judgement", "Replicas", "RowTally", "binom_tail", "certain", "contexts_to_pass", "judge",
           "judge_replicas", "judge_tallies", "may_close", "may_replicate", "origin_bound", "prefer_calibrated",
           "replica_bound", "replica_p", "split", "stage_one_wins", "wins_needed"]

"""The answer noise of a run: how often a change that has nothing to do with a task still changes its score.

Models whose answers shift with any edit of their prompt make every candidate show some wins and losses, even one
that does nothing. The sign test (`stats`) looks at those differing pairs only, and so cannot tell a real gain on
a few tasks from noise: 4 wins and 0 losses is as likely as 0 and 4 under the null, whatever the ties. But ties are
information: if unrelated tasks rarely change, a few wins exactly where the change should act are strong evidence.

`NoiseEstimate` measures that from the *far* rows of every evidence the gate gathered (the tasks least like each
candidate's origin, `Evidence.far`): the rate at which a task the base failed turns into a win, and a task the base
solved into a loss. The far rows are chosen by the inputs alone, never by a score, so the estimate is not biased
by what the test later decides; any real effect that reaches them only makes the noise look larger, which makes the
test stricter. The acceptance test (`optim.judge`) uses an upper credible bound of the win rate.

Where data is small there are few far rows, and a lucky one or two put that bound far above the noise. The gate's
screens give a second measure: each scores a proposal on the training task it came from, which the base failed, and
most proposals of a weak proposer do nothing there. The share of screens the candidate wins is the noise plus the
real effects among the proposals, so it too can only err high (and a proposer that is mostly right makes it useless,
never wrong). The bound used is the lower of the two, the screens' taken far out in the tail (`SCREEN_TAIL`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from scipy.special import betaincinv

from agentgrad.core._checks import number
from agentgrad.core.evidence import Evidence
from agentgrad.errors import StateDictError

PRIOR_WINS, PRIOR_ROOM = 0.5, 15.0  # the win rate's prior: half a win in fifteen chances (mean 0.033)
PRIOR_LOSSES = 0.5  # the loss rate's prior: as for wins (a low rate makes harm easier to see)
UPPER = 0.975  # the credible level of `win_upper`
SCREEN_TAIL = 0.02  # the screens' bound is taken at this share of that level's tail
_FIELDS = ("win_room", "wins", "loss_room", "losses", "screen_room", "screen_wins")
_SINCE = ("screen_room", "screen_wins")  # may be missing from a state dict written before screens were counted


def _upper(hits: float, room: float, level: float, *, prior: float = PRIOR_WINS) -> float:
    """The `level` quantile of the rate's posterior: `hits` in `room` chances, on a prior of `prior` hits in
    `PRIOR_ROOM` chances."""
    return float(betaincinv(prior + hits, PRIOR_ROOM - prior + max(room - hits, 0.0), level))


@dataclass(frozen=True)
class NoiseEstimate:
    """Counts of noise seen on far rows, and on screens.

    Args:
        win_room: summed room to win (1 − base score) over far rows.
        wins: summed positive deltas over far rows.
        loss_room: summed room to lose (the base score) over far rows.
        losses: summed negative deltas (as positive amounts) over far rows.
        screen_room: summed room to win over the origin tasks of screens.
        screen_wins: summed positive deltas there.
    """

    win_room: float = 0.0
    wins: float = 0.0
    loss_room: float = 0.0
    losses: float = 0.0
    screen_room: float = 0.0
    screen_wins: float = 0.0

    def __post_init__(self) -> None:
        for name in _FIELDS:
            number(getattr(self, name), f"noise estimate: {name}", low=0.0, error=StateDictError)
        if self.wins > self.win_room + 1e-9 or self.losses > self.loss_room + 1e-9 or \
                self.screen_wins > self.screen_room + 1e-9:
            raise StateDictError(f"noise estimate: more wins or losses than room for them: {self.to_dict()}")

    def added(self, evidences: Iterable[Evidence]) -> NoiseEstimate:
        """A new estimate with the far rows of `evidences` counted."""
        win_room, wins, loss_room, losses = self.win_room, self.wins, self.loss_room, self.losses
        for evidence in evidences:
            far = set(evidence.far)
            for row in evidence.rows:
                if row.task_id in far:
                    win_room += 1.0 - row.base
                    wins += max(row.delta, 0.0)
                    loss_room += row.base
                    losses += max(-row.delta, 0.0)
        return replace(self, win_room=win_room, wins=wins, loss_room=loss_room, losses=losses)

    def screened(self, pairs: Iterable[tuple[float, float]]) -> NoiseEstimate:
        """A new estimate with screens counted: (base, candidate) scores on the origin tasks of screened proposals,
        every screen whatever its result (the base's score there is the failed rollout's)."""
        room, wins = self.screen_room, self.screen_wins
        for base, candidate in pairs:
            room += 1.0 - base
            wins += max(candidate - base, 0.0)
        return replace(self, screen_room=room, screen_wins=wins)

    def _lower_of(self, wins: float, room: float, level: float) -> float:
        """The far rows' bound (`wins` in `room`) at `level`, or, once screens were seen, the lower of it and the
        screens' bound taken far out in the tail (`SCREEN_TAIL` of the tail of `level`): together they hold at
        1 − (1 + SCREEN_TAIL)(1 − level), 97.45% for 97.5%, and where the screens tell nothing the bound is the far
        rows' as before. Screens come with every proposal, so a narrow tail costs them little."""
        far = _upper(wins, room, level)
        if self.screen_room <= 0:
            return far
        return min(far, _upper(self.screen_wins, self.screen_room, 1.0 - (1.0 - level) * SCREEN_TAIL))

    def win_upper(self, level: float = UPPER) -> float:
        """An upper credible bound of the chance that noise turns a failed task into a win. The prior, half a win
        in fifteen chances, says noise is usually small, but weakly: alone its bound is 0.16, and a few dozen far
        rows of the run itself outweigh it."""
        return self._lower_of(self.wins, self.win_room, level)

    def row_win_upper(self, level: float = UPPER) -> float:
        """An upper credible bound of the chance that noise makes a win of a task scored afresh, the base not
        chosen for failing it (wins per far row, not per failed one: what the replication test needs); same
        prior as `win_upper`."""
        return self._lower_of(self.wins, self.win_room + self.loss_room, level)

    def loss_rate(self) -> float:
        """The posterior mean chance that noise turns a solved task into a loss (prior: half a loss in fifteen)."""
        return (PRIOR_LOSSES + self.losses) / (PRIOR_ROOM + self.loss_room)

    def loss_upper(self, level: float = UPPER) -> float:
        """An upper credible bound of that chance: losses beyond it are harm, not noise (a generous bound, so a
        lone loss is never taken for harm before the run has measured its noise)."""
        return _upper(self.losses, self.loss_room, level, prior=PRIOR_LOSSES)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, data: Mapping[str, Any] | None) -> NoiseEstimate:
        """Read `to_dict` output back (None: nothing seen yet); `StateDictError` for anything malformed."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping) or not set(_FIELDS) - set(_SINCE) <= set(data) <= set(_FIELDS):
            raise StateDictError(f"noise estimate: unexpected state dict {data!r}")
        return cls(**{k: data[k] for k in _FIELDS if k in data})

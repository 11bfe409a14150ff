"""The screen: a new proposal is first tried on the training task it was proposed for (`GateConfig.screen`; with
`screen_tasks` > 1, on a minibatch of training tasks); one that does not beat the base there is rejected at the
cost of one call. The screen can only reject, so it never adds a false accept.

Each screen is also an observation of the answer noise (`optim.noise`, `NoiseEstimate.screened`), but only the
first screen of a pair of texts on a task is: a change proposed again on the same head from the same task is
screened on the same two texts, whose scores are cached (and a deterministic model would answer the same), so a
repeat is no new observation. Counting repeats made the noise look smaller than it was: one run screened the same
rule 25 times on the task whose answer its text flipped, and each repeat counted as one more task the noise left
alone. Repeats are counted as ``screen_repeats``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentgrad.core.artifact import content_hash
from agentgrad.core.decision import Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.runtime.records import Rollout, Snapshot
from agentgrad.runtime.scheduler import seeded_order

if TYPE_CHECKING:
    from agentgrad.runtime.engine import Engine


async def passes_screen(engine: Engine, diff: Diff, base: Snapshot, cand_text: str, origin: Rollout) -> bool:
    """True if the proposal `diff` (the text `cand_text` on `base`) beats the base on its origin task (and the
    screen's other training tasks); else records the rejection and returns False. The origin task's pair is noted
    as noise evidence the first time these texts are screened on it (`NoiseWatch.screened`)."""
    more = engine.config.gate.screen_tasks - 1
    others = seeded_order([t for t in engine.train if t != origin.task_id], seed=engine.config.seed,
                          salt=diff.id)[:more] if more else []
    passed, scores = await engine.gate.screen((base.text, cand_text), await engine.before(base, origin),
                                              origin.task_id, others)
    if not engine.watch.screened(*scores[origin.task_id], key=(content_hash(cand_text), origin.task_id)):
        engine.journal.counts["screen_repeats"] += 1
    if not passed:
        screened_out(engine, diff, base.version, scores)
    return passed


def screened_out(engine: Engine, diff: Diff, version: int, scores: Mapping[str, tuple[float, float]]) -> None:
    """Record the screen's rejection of `diff` (on head `version`, with the (base, candidate) `scores`)."""
    evidence = Evidence.paired({t: b for t, (b, _) in scores.items()}, {t: c for t, (_, c) in scores.items()},
                               base_version=version)
    engine.journal.counts["screened_out"] += 1
    engine.parking.offer([diff])  # a possible context for replications (`runtime.parking`)
    where = "the task it was proposed for" if len(scores) == 1 else \
        f"the minibatch of {len(scores)} training tasks it was screened on"
    engine.record_verdict(diff, evidence, Outcome.REJECTED, "gate", f"screened out: it does not beat the base on "
                          f"{where}", {"n": float(len(scores)), "base": sum(b for b, _ in scores.values()),
                                       "candidate": sum(c for _, c in scores.values())})


__all__ = ["passes_screen", "screened_out"]

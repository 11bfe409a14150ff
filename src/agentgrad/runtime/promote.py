"""Promotion `dev → stable`: after every K accepted commits, confirm on the whole validation split, then promote.

The check scores the `dev` head and the `stable` head on every validation task (cached scores are reused, new
calls are charged to the gate budget). `stable` moves up to the checked version only if it does at least as well;
otherwise the policy asks again after K more commits. The test split is never used: it is only reported. The
asynchronous runtime runs checks in their own task (`dev` may move on meanwhile; the checked version is promoted),
so the aggregator never waits for one.
"""

from __future__ import annotations

from agentgrad.runtime.budget import OutOfBudget
from agentgrad.runtime.engine import Engine


async def maybe_promote(engine: Engine) -> bool:
    """Run a due promotion check; True if `stable` moved."""
    if not engine.promotion_due:
        return False
    engine.promotion_due = False
    artifact_id = engine.artifact.id
    dev, stable = engine.store.head(artifact_id), engine.store.head(artifact_id, "stable")
    if dev.number == stable.number:
        engine.promotion.confirm(True)
        return False
    try:
        scores = await engine.gate.score_pairs((dev.text, stable.text), engine.val)
    except OutOfBudget:
        engine.emit("promotion", {"dev": dev.number, "stable": stable.number, "outcome": "no budget left"})
        return False
    dev_mean = sum(d for d, _ in scores.values()) / len(scores)
    stable_mean = sum(s for _, s in scores.values()) / len(scores)
    passed = dev_mean >= stable_mean
    engine.promotion.confirm(passed)
    if passed:
        engine.store.promote_to({artifact_id: dev.number})
    engine.emit("promotion", {"dev": dev.number, "stable": stable.number, "dev_val": dev_mean,
                              "stable_val": stable_mean, "outcome": "promoted" if passed else "kept stable"})
    return passed

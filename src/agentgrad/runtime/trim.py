"""Passengers: the parts of a proposal its own failure does not need.

A proposer often bundles several edits in one proposal: the rule that fixes the failure it was shown, and a
generic tip ("be concise") beside it. The gate judges a diff as a whole, so a tip that does nothing rides along
with a rule that wins, and is committed with it. Fusion (`optim.fusion`) keeps junk out of a merge of *several*
diffs, each with its own evidence; within one diff there is no such evidence.

Once a diff of several ops has passed the screen (it beats the base on its origin task; a diff rebased onto a
newer head is not screened, and is trimmed against that head), `passengers` looks at each op on that task: the diff
without the op, and the op alone on the base. An op is a passenger when the origin is still won without it and the
op alone does not win it. Both texts are new, so each carries a fresh draw of any answer noise: a needed op is taken
for a passenger only if both draws go wrong at once. Ops are tried one at a time, in order, each against what is
left, and the last one always stays. An op that cannot be taken out (another op anchors on it) stays. It costs two
calls an op, only for diffs of several ops; a one-op diff is never touched. What is dropped is dropped for this
diff only: the proposer may propose it again alone, to be judged on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from agentgrad.core.diff import Diff, apply
from agentgrad.errors import ApplyConflictError, InvalidOpError

Score = Callable[[tuple[str, str], str], Awaitable[tuple[float, float]]]  # (texts, task) -> both texts' scores


async def passengers(diff: Diff, base_text: str, origin: str, base_score: float,
                     score: Score) -> tuple[Diff, tuple[int, ...]]:
    """(`diff` without its passengers, the indices of the ops taken out) on task `origin`, where the base scored
    `base_score`; `score((a, b), task)` scores two texts on a task at once."""
    kept, dropped = list(range(len(diff.ops))), list[int]()
    for index in range(len(diff.ops)):
        if len(kept) == 1:
            break
        rest = [i for i in kept if i != index]
        texts = _texts(diff, base_text, rest, index)
        if texts is None:
            continue
        without, alone = await score(texts, origin)
        if without > base_score and alone <= base_score:
            kept, dropped = rest, [*dropped, index]
    return replace(diff, ops=tuple(diff.ops[i] for i in kept)), tuple(dropped)


def _texts(diff: Diff, base_text: str, rest: list[int], index: int) -> tuple[str, str] | None:
    """(the base with the ops `rest`, the base with op `index` alone), or None if either does not apply."""
    try:
        return (apply(replace(diff, ops=tuple(diff.ops[i] for i in rest)), base_text),
                apply(replace(diff, ops=(diff.ops[index],)), base_text))
    except (ApplyConflictError, InvalidOpError):
        return None


__all__ = ["Score", "passengers"]

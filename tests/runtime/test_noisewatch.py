"""Noise pairs between a head and its parent: only tasks far from the commit's origin, each once, at flush."""

from __future__ import annotations

from agentgrad.optim.noise import NoiseEstimate
from agentgrad.runtime.noisewatch import NoiseWatch

NEAR = {"t1", "t2"}  # the tasks like the commit's origin t0


def _watch(cached: dict[tuple[str, str], float]) -> NoiseWatch:
    return NoiseWatch(lambda origin, tasks: [t for t in tasks if t not in NEAR],
                      lambda text, task: cached.get((text, task)))


def test_a_far_task_scored_on_a_head_and_its_parent_is_one_noise_pair_counted_once() -> None:
    watch = _watch({("v0", "t5"): 0.0, ("v0", "t6"): 1.0, ("v0", "t1"): 0.0})
    watch.committed(1, "v1", "v0", ["t0"])
    watch.scored("v1", "t5", 1.0)  # far, parent failed it: a noise win
    watch.scored("v1", "t5", 1.0)  # the same (version, task) again: not counted twice
    watch.scored("v1", "t6", 1.0)  # far, a tie
    watch.scored("v1", "t1", 1.0)  # near the origin: the commit may have fixed it, so it is no noise evidence
    watch.scored("v1", "t7", 0.0)  # the parent's score is not cached
    watch.scored("v9", "t5", 0.0)  # a text that is no committed head
    noise = watch.flush(NoiseEstimate())
    assert noise == NoiseEstimate(win_room=1.0, wins=1.0, loss_room=1.0, losses=0.0)
    assert watch.flush(noise) is noise and watch.sizes()["pending"] == 0  # flushed once


def test_a_commit_with_no_known_origin_gives_no_pairs() -> None:
    watch = _watch({("v0", "t5"): 1.0})
    watch.committed(1, "v1", "v0", [])
    watch.scored("v1", "t5", 0.0)
    assert watch.flush(NoiseEstimate()) == NoiseEstimate()


def test_an_earlier_heads_score_stands_for_the_head_only_across_commits_for_other_tasks() -> None:
    watch = _watch({("v0", "t5"): 1.0, ("v0", "t1"): 1.0, ("v1", "t6"): 0.0})
    watch.committed(1, "v1", "v0", ["t0"])
    watch.committed(2, "v2", "v1", ["t9"])
    assert watch.earlier("v2", "t5") == 1.0  # two commits back, both for other tasks
    assert watch.earlier("v2", "t6") == 0.0  # the nearest head scored on it decides
    assert watch.earlier("v2", "t1") is None  # a commit since was for a task like t1: it may have moved it
    assert watch.earlier("v2", "t5", depth=1) is None  # v1 has no score of t5 and the look back ends there
    assert watch.earlier("v0", "t5") is None  # the first head has no earlier one


def test_what_an_earlier_head_scored_is_looked_up_anew_after_a_commit() -> None:
    """`earlier` remembers each head's chain of commits until the next commit: asked before a head's commit is
    known, and again after, it sees the commit."""
    watch = _watch({("v0", "t5"): 1.0})
    assert watch.earlier("v1", "t5") is None  # v1 is no known head yet
    watch.committed(1, "v1", "v0", ["t0"])
    assert watch.earlier("v1", "t5") == 1.0
    watch.committed(2, "v2", "v1", ["t9"])  # a commit for another task
    assert watch.earlier("v2", "t5") == 1.0 and watch.earlier("v1", "t5") == 1.0


def test_screens_wait_for_the_step_and_are_counted_once() -> None:
    watch = _watch({})
    watch.screened(0.0, 1.0)
    watch.screened(0.0, 0.0)
    assert watch.sizes()["pending"] == 2
    noise = watch.flush(NoiseEstimate())
    assert (noise.screen_room, noise.screen_wins) == (2.0, 1.0)
    assert watch.flush(noise) is noise and watch.sizes()["pending"] == 0


def test_a_screen_of_the_same_texts_on_the_same_task_is_kept_once() -> None:
    watch = _watch({})
    assert watch.screened(0.0, 0.0, key=("cand", "t1"))
    assert not watch.screened(0.0, 0.0, key=("cand", "t1"))
    assert watch.screened(0.0, 0.0, key=("cand", "t2")) and watch.screened(0.0, 0.0, key=("other", "t1"))
    assert watch.screens == [(0.0, 0.0)] * 3

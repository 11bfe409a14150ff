"""Parking: candidates held to replicate wait for a fresh context, a new head or a sibling's change, and the
turned-down changes kept as siblings are bounded."""

from __future__ import annotations

from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.optim.base import Candidate
from agentgrad.runtime.parking import (
    EARLIER,
    SPARES,
    TRIES,
    Context,
    Earlier,
    Parking,
    context_key,
    replica_id,
    used_contexts,
)


def candidate(name: str, origin: str | None = "t1") -> Candidate:
    diff = Diff("skills/s", 0, (Op.add("key", f"{name}: use method 1"),), id=name)
    return Candidate(diff, Evidence((Row("t2", 1.0, 1.0),), base_version=0), origin=origin, replicate=True)


def test_a_replica_id_names_its_origin_and_context_and_is_read_back() -> None:
    rid = replica_id("t7", "# s\n- a: use method 1\n")
    assert rid == f"t7@{context_key('# s' + chr(10) + '- a: use method 1' + chr(10))}"
    evidence = Evidence((Row(rid, 0.0, 1.0),), replicas=(rid,))
    assert used_contexts(Candidate(Diff("skills/s", 0, (), id="x"), evidence)) == {rid.split("@")[1]}


def test_a_fresh_head_releases_a_waiting_candidate_without_a_sibling() -> None:
    parking = Parking()
    parking.park(candidate("a"))
    assert parking.release(lambda c, sibling: False) == []
    assert len(parking) == 1
    (released,) = parking.release(lambda c, sibling: sibling is None)
    assert released.diff.id == "a" and not parking.siblings and not len(parking)


def test_two_waiting_candidates_are_each_others_context() -> None:
    parking = Parking()
    parking.park(candidate("a"))
    parking.park(candidate("b"))
    released = parking.release(lambda c, sibling: sibling is not None)
    assert [c.diff.id for c in released] == ["a", "b"]
    assert parking.siblings["a"] == candidate("b").diff and parking.siblings["b"] == candidate("a").diff


def test_a_lone_candidate_takes_the_newest_turned_down_change_that_is_fresh_for_it() -> None:
    parking = Parking()
    spares = [candidate(f"s{i}").diff for i in range(3)]
    parking.offer(spares)
    parking.park(candidate("a"))
    (released,) = parking.release(lambda c, sibling: isinstance(sibling, Diff) and sibling.id != "s2")
    assert parking.siblings[released.diff.id] == spares[1]


def test_the_spares_are_bounded_newest_first() -> None:
    parking = Parking()
    parking.offer([candidate(f"s{i}").diff for i in range(SPARES + 5)])
    assert len(parking.spares) == SPARES
    assert parking.spares[0].id == f"s{SPARES + 4}"


def test_parking_again_forgets_a_chosen_sibling_and_origins_are_known() -> None:
    parking = Parking()
    parking.park(candidate("a", origin="t9"))
    parking.park(candidate("b", origin=None))
    assert parking.origins == frozenset({"t9"})
    parking.release(lambda c, sibling: sibling is not None)
    parking.park(candidate("a"))
    assert "a" not in parking.siblings


def test_at_most_tries_siblings_are_tried_per_candidate() -> None:
    parking = Parking()
    parking.offer([candidate(f"s{i}").diff for i in range(TRIES + 2)])  # newest first: s5, s4, ...
    parking.park(candidate("a"))
    tried: list[str] = []

    def fresh(c: Candidate, sibling: Context | None) -> bool:
        if isinstance(sibling, Diff):
            tried.append(sibling.id)
        return isinstance(sibling, Diff) and sibling.id == "s0"  # only the oldest would do, and it is past the tries

    assert parking.release(fresh) == []
    assert len(tried) == TRIES and len(parking) == 1


def test_a_candidate_that_used_the_first_siblings_tries_as_many_more() -> None:
    """The siblings come in a fixed order: a candidate whose replicas used the first `TRIES` of them would never
    be placed again (seen: seven rules one context short, stranded, and none committed) unless its tries grow."""
    spares = [candidate(f"s{i}").diff for i in range(TRIES + 3)]
    parking = Parking()
    parking.offer(spares)  # newest first
    rids = tuple(replica_id("t1", f"text {i}") for i in range(TRIES))
    used = Candidate(candidate("a").diff, Evidence(tuple(Row(r, 1.0, 0.0) for r in rids), base_version=0,
                                                   replicas=rids), origin="t1", replicate=True)
    parking.park(used)
    first = {d.id for d in parking.spares[:TRIES]}
    (released,) = parking.release(lambda c, sibling: isinstance(sibling, Diff) and sibling.id not in first)
    assert parking.siblings[released.diff.id] == parking.spares[TRIES]


def test_a_released_candidate_is_out_for_replication_until_parked_again_or_decided() -> None:
    parking = Parking()
    parking.park(candidate("a"))
    parking.park(candidate("b"))
    parking.release(lambda c, sibling: True)
    assert sorted(parking.out_for_replication({"a", "b"})) == [0, 0] and parking.replica_counts() == []
    parking.park(candidate("a"))  # back, waiting for its next context
    assert parking.out_for_replication({"a", "b"}) == [0] and parking.replica_counts() == [0]
    assert parking.out_for_replication({"a"}) == []  # b was decided: forgotten


def test_earlier_versions_are_contexts_only_once_the_run_winds_down() -> None:
    parking = Parking()
    parking.park(candidate("a"))
    versions = [Earlier(3, "v3"), Earlier(2, "v2")]

    def earlier() -> list[Earlier]:
        return versions
    assert parking.release(lambda c, sibling: isinstance(sibling, Earlier), earlier) == []
    parking.winding_down = True
    (released,) = parking.release(lambda c, sibling: isinstance(sibling, Earlier) and sibling.version == 2, earlier)
    assert released.diff.id == "a" and parking.siblings["a"] == Earlier(2, "v2")


def test_the_earlier_contexts_are_tried_in_their_order_after_the_siblings() -> None:
    parking = Parking()
    parking.winding_down = True
    parking.offer([candidate("s").diff])
    parking.park(candidate("a"))
    tried: list[Context | None] = []

    def fresh(c: Candidate, sibling: Context | None) -> bool:
        tried.append(sibling)
        return False

    many = [Earlier(v, f"v{v}") for v in range(EARLIER + 3, 0, -1)]
    parking.release(fresh, lambda: many)
    assert tried[0] is None and isinstance(tried[1], Diff) and tried[2:] == many  # `earlier` bounds its list


def test_a_sibling_that_keeps_the_head_whole_comes_before_a_newer_one_that_rewrites_it() -> None:
    parking = Parking()
    keep, rewrite = candidate("keep").diff, candidate("rewrite").diff
    parking.offer([keep, rewrite])  # newest first: rewrite, keep
    parking.park(candidate("a"))
    (released,) = parking.release(lambda c, sibling: isinstance(sibling, Diff), keeps=lambda d: d.id != "rewrite")
    assert parking.siblings[released.diff.id] == keep


def test_a_sibling_that_rewrites_the_head_is_a_context_only_once_the_run_winds_down_before_earlier_versions() -> None:
    parking = Parking()
    parking.offer([candidate("rewrite").diff])
    parking.park(candidate("a"))

    def fresh(c: Candidate, sibling: Context | None) -> bool:
        return sibling is not None

    def earlier() -> list[Earlier]:
        return [Earlier(1, "v1")]
    assert parking.release(fresh, earlier, keeps=lambda d: False) == []
    parking.winding_down = True
    (released,) = parking.release(fresh, earlier, keeps=lambda d: False)
    assert parking.siblings[released.diff.id] == candidate("rewrite").diff


def test_once_the_earlier_versions_are_used_up_an_earlier_version_with_a_siblings_change_serves() -> None:
    parking = Parking()
    parking.winding_down = True
    parking.park(candidate("a"))
    parking.park(candidate("b"))
    asked: list[tuple[int, str]] = []

    def combine(version: Earlier, sibling: Diff) -> Earlier:
        asked.append((version.version, sibling.id))
        return Earlier(version.version, version.text + sibling.id, via=sibling.id)

    def fresh(c: Candidate, context: Context | None) -> bool:  # only a combined context is new to either
        return isinstance(context, Earlier) and context.via is not None
    released = parking.release(fresh, lambda: [Earlier(2, "v2"), Earlier(1, "v1")], combine=combine)
    assert [c.diff.id for c in released] == ["a", "b"]
    assert parking.siblings["a"] == Earlier(2, "v2b", via="b") and parking.siblings["b"] == Earlier(2, "v2a", via="a")
    assert asked == [(2, "b"), (2, "a")]  # made lazily, each once


def test_combined_contexts_wait_for_the_run_to_wind_down_and_are_bounded() -> None:
    parking = Parking()
    parking.park(candidate("a"))
    parking.offer([candidate(f"s{i}").diff for i in range(TRIES + 2)])
    tried: list[Earlier] = []

    def fresh(c: Candidate, context: Context | None) -> bool:
        if isinstance(context, Earlier) and context.via is not None:
            tried.append(context)
        return False

    many = [Earlier(v, f"v{v}") for v in range(EARLIER + 3, 0, -1)]

    def combine(version: Earlier, sibling: Diff) -> Earlier:
        return Earlier(version.version, version.text + sibling.id, via=sibling.id)
    assert parking.release(fresh, lambda: many, combine=combine) == [] and not tried
    parking.winding_down = True
    assert parking.release(fresh, lambda: many, combine=combine) == []
    assert len(tried) == len(many) * TRIES and {c.version for c in tried} == {v.version for v in many}


def test_a_pick_leaves_some_ready_candidates_waiting_without_a_sibling_and_not_stranded() -> None:
    parking = Parking()
    for name in "abc":
        parking.park(candidate(name))
    parking.winding_down = True
    released = parking.release(lambda c, sibling: sibling is not None,
                               pick=lambda ready: ([ready[1]], [ready[0], ready[2]]))
    assert [c.diff.id for c in released] == ["b"] and sorted(parking.waiting) == ["a", "c"]
    assert set(parking.siblings) == {"b"} and parking.stranded == frozenset()
    assert parking.replica_counts() == [0, 0]  # still counted: their calls are kept

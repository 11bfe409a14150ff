"""Optimizer and store benchmarks (issue 2). Writes benchmarks/out/optimizer_bench.json.

Measures: acceptance decisions per second (accept stage alone and the whole default pipeline); store commits per
second with the git mirror on, and how fast the mirror catches up; store size and peak memory with many diffs and
evidence rows; on the reference world with 20% junk proposals, junk rules committed; false accepts of exact ties.
Run `python benchmarks/optimizer_bench.py --quick` for a smaller, faster pass.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence, Row
from agentgrad.core.ops import Op
from agentgrad.core.units import Scope, parse
from agentgrad.optim.acceptance import accept_if
from agentgrad.optim.aggregator import Aggregator
from agentgrad.optim.base import Candidate, Context, Head
from agentgrad.optim.recipes import default
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.driver import WorldDriver
from agentgrad.testing.world import ReferenceWorld, WorldConfig

OUT = Path(__file__).parent / "out"


def _evidence(rng: random.Random, n: int, lift: float) -> Evidence:
    rows = []
    for i in range(n):
        base = float(rng.random() < 0.5)
        cand = 1.0 if rng.random() < lift else base
        rows.append(Row(f"t{i}", base, cand))
    return Evidence(tuple(rows))


def bench_decisions(n: int) -> dict[str, float]:
    """Decisions per second on one-candidate batches of 32-row evidence."""
    rng = random.Random(0)
    ctx = Context({"skills/s": Head(0, "")})
    cands = [Candidate(Diff("skills/s", 0, (Op.add("rule", f"- rule {i}"),)), _evidence(rng, 32, 0.3))
             for i in range(n)]
    out: dict[str, float] = {}
    for name, pipeline in (("accept_stage", accept_if()), ("default_pipeline", default())):
        agg = Aggregator(pipeline)
        start = time.perf_counter()
        for cand in cands:
            agg.step([cand], ctx)
        elapsed = time.perf_counter() - start
        out[f"{name}_decisions_per_s"] = n / elapsed
        out[f"{name}_ms_per_decision"] = 1000 * elapsed / n
    return out


def _accepted(diff: Diff) -> Decision:
    return Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "bench", {"p": 0.99})


def bench_store(n: int) -> dict[str, float]:
    """Single-transaction commits per second with the git mirror on, then the mirror's catch-up."""
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "run") as store:
        store.add_artifact(Artifact("skills/s", Kind.SKILL, "# skill\n"))
        evidence = Evidence.paired({"t1": 0.0, "t2": 0.0}, {"t1": 1.0, "t2": 1.0})
        diffs = [Diff("skills/s", i, (Op.add("rule", f"- rule number {i}"),)) for i in range(n)]
        start = time.perf_counter()
        for diff in diffs:
            store.commit(diff, evidence, _accepted(diff))
        commit_s = time.perf_counter() - start
        start = time.perf_counter()
        mirrored = store.sync_git()
        git_s = time.perf_counter() - start
        return {"commits": n, "commits_per_s": n / commit_s, "git_commits_written": mirrored,
                "git_catch_up_commits_per_s": mirrored / git_s if git_s else 0.0, "git_lag_after_sync":
                store.git_lag()}


def bench_size(n_diffs: int, rows_per_diff: int) -> dict[str, float]:
    """Store size and peak memory after recording many rejected diffs with their evidence."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        with SQLiteStore(run, git=False) as store:
            store.add_artifact(Artifact("skills/s", Kind.SKILL, ""))
            start = time.perf_counter()
            for i in range(n_diffs):
                diff = Diff("skills/s", 0, (Op.add("rule", f"- candidate rule {i}"),))
                rows = tuple(Row(f"t{j}", 0.0, float(j % 2)) for j in range(rows_per_diff))
                decision = Decision(diff.id, diff.artifact_id, Outcome.REJECTED, "accept", "bench", {"p": 0.4})
                store.record(diff, Evidence(rows), decision)
            elapsed = time.perf_counter() - start
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"diffs": n_diffs, "evidence_rows": n_diffs * rows_per_diff, "records_per_s": n_diffs / elapsed,
            "store_mib": size / 2**20, "peak_rss_mib": peak_kib / 1024}


def _junk_committed(world: ReferenceWorld, text: str) -> int:
    categories = set(world.categories)
    return sum(1 for key in parse(Scope.KEY, text).keys() if key not in categories)  # noqa: SIM118


def bench_world(seeds: int, rounds: int) -> dict[str, Any]:
    """Junk rules committed on the reference world with 20% junk proposals (goal 0)."""
    junk, kinds, tests = 0, dict[str, int](), list[tuple[float, float]]()
    for seed in range(seeds):
        world = ReferenceWorld(WorldConfig(seed=seed, tasks_per_category=24, noise=0.02, p_right=0.45, p_junk=0.2,
                                           p_contradict=0.2, p_duplicate=0.15))
        with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "run", git=False) as store:
            report = WorldDriver(world, store, Aggregator(default()), workers=4).run(rounds)
            junk += _junk_committed(world, store.artifact(world.artifact.id).text)
        for kind, count in report.accepted_kinds.items():
            kinds[kind] = kinds.get(kind, 0) + count
        tests.append((report.test_before, report.test_after))
    return {"seeds": seeds, "rounds": rounds, "junk_rules_committed": junk, "accepted_by_kind": kinds,
            "mean_test_before": sum(b for b, _ in tests) / seeds, "mean_test_after": sum(a for _, a in tests) / seeds}


def bench_ties(trials: int) -> dict[str, float]:
    """Exact ties (wins == losses, binary and continuous) through the default pipeline: accepts (goal 0)."""
    rng = random.Random(1)
    ctx = Context({"skills/s": Head(0, "")})
    agg = Aggregator(default())
    accepted = 0
    for i in range(trials):
        n = rng.randint(1, 40)
        base = [rng.random() for _ in range(n)]
        cand = list(base)
        perm = list(range(n))
        rng.shuffle(perm)
        cand = [base[perm[j]] for j in range(n)]  # same multiset of scores: sum of deltas is exactly 0
        ev = Evidence(tuple(Row(f"t{j}", base[j], cand[j]) for j in range(n)))
        w, lo = ev.wins_losses()
        if abs(w - lo) > 1e-9:
            continue
        diff = Diff("skills/s", 0, (Op.add("rule", f"- tie {i}"),))
        result = agg.step([Candidate(diff, ev)], ctx)
        accepted += sum(d.outcome is Outcome.ACCEPTED for d in result.decisions)
    return {"tie_trials": trials, "tie_false_accepts": accepted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a fast pass")
    args = parser.parse_args()
    q = args.quick
    results = {
        "decisions": bench_decisions(2_000 if q else 20_000),
        "store": bench_store(2_000 if q else 20_000),
        "ties": bench_ties(10_000),
        "world": bench_world(3 if q else 10, 12),
        "size": bench_size(10_000 if q else 100_000, 10),
    }
    OUT.mkdir(exist_ok=True)
    path = OUT / "optimizer_bench.json"
    path.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

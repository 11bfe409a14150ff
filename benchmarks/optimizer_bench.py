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
from agentgrad.optim.noise import NoiseEstimate
from agentgrad.optim.recipes import default
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.evolve import evolve
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
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


def _steady_diffs(n: int, keys: int = 20) -> tuple[str, list[Diff]]:
    """A 20-entry keyed artifact and `n` diffs that each replace one entry (the text keeps its size)."""
    text = "".join(f"- k{i}: v0\n" for i in range(keys))
    values = dict.fromkeys(range(keys), "v0")
    diffs = []
    for number in range(n):
        key = number % keys
        diffs.append(Diff("skills/s", number, (Op.replace("key", f"- k{key}: {values[key]}",
                                                          f"- k{key}: v{number + 1}"),)))
        values[key] = f"v{number + 1}"
    return text, diffs


def bench_store(n: int, batch: int = 50) -> dict[str, float]:
    """Commits per second with the git mirror on (one transaction each, and batched), then the mirror's catch-up."""
    evidence = Evidence.paired({"t1": 0.0, "t2": 0.0}, {"t1": 1.0, "t2": 1.0})
    out: dict[str, float] = {"commits": n}
    for mode in ("single", "batched"):
        with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "run") as store:
            text, diffs = _steady_diffs(n)
            store.add_artifact(Artifact("skills/s", Kind.SKILL, text))
            start = time.perf_counter()
            if mode == "single":
                for diff in diffs:
                    store.commit(diff, evidence, _accepted(diff))
            else:
                for i in range(0, n, batch):
                    store.commit_many([(d, evidence, _accepted(d)) for d in diffs[i:i + batch]])
            out[f"{mode}_commits_per_s"] = n / (time.perf_counter() - start)
            start = time.perf_counter()
            mirrored = store.sync_git()
            git_s = time.perf_counter() - start
            out[f"{mode}_git_catch_up_commits_per_s"] = mirrored / git_s if git_s else 0.0
            out[f"{mode}_git_lag_after_sync"] = store.git_lag()
    return out


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


def bench_world(seeds: int, rollouts: int) -> dict[str, Any]:
    """Junk rules committed by evolve() on the reference world with 20% junk proposals (goal 0), both runtimes."""
    out: dict[str, Any] = {"seeds": seeds, "rollouts_per_run": rollouts}
    for mode in ("sync", "async"):
        junk, before, after, accepted = 0, 0.0, 0.0, 0
        for seed in range(seeds):
            world = ReferenceWorld(WorldConfig(seed=seed, tasks_per_category=40, noise=0.02, p_right=0.45,
                                               p_junk=0.2, p_contradict=0.2, p_duplicate=0.15))
            agent = WorldAgent(world)
            with tempfile.TemporaryDirectory() as tmp:
                result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy,
                                artifact=world.artifact, budget=Budget(rollouts=rollouts), workers=8,
                                asynchronous=mode == "async", store=Path(tmp) / "run", seed=seed)
            junk += _junk_committed(world, result.artifact.text)
            before += result.baseline_test_reward or 0.0
            after += result.test_reward or 0.0
            accepted += len(result.history) - 1
        out[mode] = {"junk_rules_committed": junk, "versions_committed": accepted,
                     "mean_test_before": before / seeds, "mean_test_after": after / seeds}
    return out


def _noise(rng: random.Random) -> NoiseEstimate | None:
    """No estimate (the sign test), or a measured noise of 0-20% on up to 400 far rows."""
    if rng.random() < 0.25:
        return None
    room, rate = rng.uniform(0, 400), rng.uniform(0, 0.2)
    return NoiseEstimate(room, room * rate, room, room * rate)


def _tie(rng: random.Random, n: int) -> Evidence | None:
    """Evidence whose wins equal its losses exactly (the candidate's scores are the base's, permuted), or None."""
    base = [rng.random() for _ in range(n)]
    perm = list(range(n))
    rng.shuffle(perm)
    rows = tuple(Row(f"t{j}", base[j], base[perm[j]]) for j in range(n))
    ev = Evidence(rows, focus=tuple(r.task_id for r in rows[:rng.randint(0, n)]), calibrated=rng.random() < 0.5)
    w, lo = ev.wins_losses()
    return ev if abs(w - lo) <= 1e-9 else None


def _no_effect(rng: random.Random, n: int) -> Evidence:
    """Evidence of a change that changes no score, on `n` tasks (0 to 400)."""
    rows = tuple(Row(f"t{j}", s, s) for j, s in enumerate(rng.choice((0.0, 0.5, 1.0)) for _ in range(n)))
    return Evidence(rows, focus=tuple(r.task_id for r in rows[:rng.randint(0, n)]), calibrated=rng.random() < 0.5)


def bench_ties(trials: int) -> dict[str, int]:
    """Exact ties (wins == losses, binary and continuous) and no-effect changes (every score unchanged, any split
    size) through the default pipeline, with and without a noise estimate, sign test and calibrated: accepts
    (goal 0 of each)."""
    rng = random.Random(1)
    agg = Aggregator(default())
    counts = {"tie_trials": 0, "tie_false_accepts": 0, "no_effect_trials": 0, "no_effect_false_accepts": 0}
    for i in range(trials):
        ctx = Context({"skills/s": Head(0, "")}, noise=_noise(rng))
        for kind, ev in (("tie", _tie(rng, rng.randint(1, 40))), ("no_effect", _no_effect(rng, rng.randint(0, 400)))):
            if ev is None:
                continue
            diff = Diff("skills/s", 0, (Op.add("rule", f"- {kind} {i}"),))
            result = agg.step([Candidate(diff, ev)], ctx)
            counts[f"{kind}_trials"] += 1
            counts[f"{kind}_false_accepts"] += sum(d.outcome is Outcome.ACCEPTED for d in result.decisions)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a fast pass")
    args = parser.parse_args()
    q = args.quick
    results = {
        "decisions": bench_decisions(2_000 if q else 20_000),
        "store": bench_store(2_000 if q else 20_000),
        "ties": bench_ties(10_000),
        "world": bench_world(3 if q else 10, 400),
        "size": bench_size(10_000 if q else 100_000, 10),
    }
    OUT.mkdir(exist_ok=True)
    path = OUT / "optimizer_bench.json"
    path.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

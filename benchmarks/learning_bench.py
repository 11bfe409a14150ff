"""Learning in the small, skewed, noisy regime (issue 9): agentgrad against the published gepa at equal call budgets.

Writes benchmarks/out/learning_bench.json and learning_bench.png (held-out accuracy against solver calls).

Worlds: the named presets of `agentgrad.testing.presets` (a 12-task quickstart up to 224 tasks; Zipf-like
category sizes, 0-10% answer noise re-drawn with every edit, override rules that only work with their category's
rule, a format rule every category needs, rules that solve only part of their category, junk / contradictory /
duplicate proposals), each repeated over `--seeds` independent draws. Latency is
lognormal with median 5 ms and σ 1.25 (heavy-tailed, small, so the suite runs in minutes). `--free-text` keeps
every skill as free text (`AppendRules`, evolve's default strategy) instead of keyed lines; `--bundle p` adds a
junk tip to a share p of all proposals (a model's proposal often bundles one with its fix); `--flaky s` makes a share
s of the tasks flaky (their answers flip at `--flaky-noise`, 0.3, instead of the world's rate: a model's answers
shift most on borderline inputs, and those are the failures a run sees most).

Systems, all at the same budget of solver calls (rollouts plus every evaluation; gepa's `max_metric_calls`):
`agentgrad_sync` and `agentgrad_async` (evolve() with `Budget(calls=N)`, see world_systems.call_budget), `gepa`
(gepa.optimize with its defaults over the adapter of world_systems.py, proposing on the first failing example of
a minibatch) and, on request, `gepa_reflect_all` (proposing on every failing example). Each runs with 1, 4 and 16
workers (agentgrad: `Workers` as world_systems.workers_for; gepa: S in-flight run slots in the adapter).

Per run, all computed offline from the world (no calls): held-out (test) accuracy of the system's text at the
budget (agentgrad: its head; gepa: its best candidate by validation score), gain over the starting skill, calls
and seconds until its text first reached the target (80% of the world's optimum), right / wrong / junk rules in
the final text, wrong rules in any committed version (gepa: any validated candidate), and for agentgrad the
verdict on every diff by what it held (a right rule, an override line, a wrong rule, junk). Per (world, workers),
the report also gives the solver calls each agentgrad system's mean curve takes to reach gepa's mean accuracy at
the budget, against gepa's own (noise-averaged curves; `learning_report.per_call`).

gepa needs its own environment (make bench-learning runs this script in .venv-gepa); in an environment without it
the gepa systems are skipped with a note. The full suite takes about 15 minutes on 2 cores; `--quick` (1 seed, 2
worlds) under a minute.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from agentgrad.testing import drawn
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.presets import WORLDS
from agentgrad.testing.world import ReferenceWorld, WorldConfig, rule_lines
from learning_report import classify, goal_checks, plot, reason_pattern, summarise, tables
from world_systems import Trace, call_budget, evolve_world, gepa_available, optimize_gepa, workers_for

OUT = Path(__file__).parent / "out"
MEDIAN, SIGMA = 0.005, 1.25
TARGET_SHARE = 0.8
GEPA_CAP_S = 900.0
CALLS = {"quickstart": 120, "small_zipf": 300, "steep_zipf": 900, "overrides": 800, "noisy": 800,
         "poor_proposer": 600, "large": 1500, "broad": 800, "partial": 800}
QUICK_WORLDS = ("quickstart", "overrides")
SYSTEMS = ("agentgrad_sync", "agentgrad_async", "gepa", "gepa_reflect_all")
DEFAULT_SYSTEMS = ("agentgrad_sync", "agentgrad_async", "gepa")
WORKERS = (1, 4, 16)
COUNTS = ("screened_out", "tabu_skips", "in_flight_duplicates", "gated", "decision_accepted", "decision_rejected",
          "decision_fused", "decision_dropped", "hedged_calls", "reused_rollouts", "explore_unstuck", "rechecks",
          "reverified", "replications", "sibling_replications", "extended", "rebased_before_gate", "idle_rollouts")


@dataclass(frozen=True)
class Job:
    """One run: a named world drawn with `seed`, a system, its workers, and the call budget (`family`: the family
    of the ``drawn<i>`` worlds)."""

    world: str
    system: str
    workers: int
    seed: int
    calls: int
    family: int = drawn.HELD_OUT
    free_text: bool = False
    bundle: float = 0.0
    slow_proposer: float = 1.0
    flaky: tuple[float, float] = (0.0, 0.3)


def world_config(name: str, family: int) -> WorldConfig:
    """A named preset, or world ``drawn<i>`` of `family`."""
    index = drawn.parse(name)
    return WORLDS[name] if index is None else drawn.drawn(index, family)


def budget_of(name: str, family: int) -> int:
    """The world's call budget at scale 1."""
    return CALLS[name] if name in CALLS else drawn.call_budget(world_config(name, family))


def build(job: Job) -> ReferenceWorld:
    """The job's world, its seed shifted by 1000 × the job's seed (as `presets.preset`)."""
    config = world_config(job.world, job.family)
    return ReferenceWorld(replace(config, seed=config.seed + 1000 * job.seed, free_text=job.free_text,
                                  p_bundle=job.bundle, flaky_share=job.flaky[0], flaky_noise=job.flaky[1]))


def wrong_pairs(w: ReferenceWorld, texts: list[str]) -> set[tuple[str, str]]:
    """The distinct (key, value) rules naming a wrong method in any of `texts`."""
    return {(k, v) for text in texts for k, v in rule_lines(text) if w.audit(f"{k}: {v}")["wrong"]}


def outcome(w: ReferenceWorld, trace: Trace, committed: list[str]) -> dict[str, Any]:
    """What the trace shows against the world: the text at the budget, the curve and the target."""
    start, optimum = w.score(w.artifact.text, "test"), w.score(w.optimal_text(), "test")
    target = TARGET_SHARE * optimum
    curve = [(t, c, w.score(text, "test")) for t, c, text in trace.points]
    reached = next(((t, c) for t, c, r in curve if r >= target - 1e-12), None)
    final = trace.at_budget()
    test = w.score(final, "test")
    start_expected = w.expected_score(w.artifact.text, "test")
    expected = w.expected_score(final, "test")
    return {"start_test": start, "optimum_test": optimum, "target": target, "test": test, "gain": test - start,
            "test_expected": expected, "gain_expected": expected - start_expected,
            "optimum_expected": w.expected_score(w.optimal_text(), "test"),
            "calls_to_target": None if reached is None else reached[1],
            "seconds_to_target": None if reached is None else round(reached[0], 3),
            "rules": w.audit(final), "wrong_committed": len(wrong_pairs(w, committed)),
            "curve": [[c, round(r, 4)] for _, c, r in curve],
            "curve_expected": [[c, round(w.expected_score(text, "test"), 4)] for _, c, text in trace.points],
            "final_text": final}


def verdicts(w: ReferenceWorld, ops: dict[str, list[dict[str, Any]]], decisions: list[dict[str, Any]]) -> Counter[str]:
    """Final verdicts on agentgrad's diffs, as ``class | outcome | stage | reason pattern`` counts."""
    tally: Counter[str] = Counter()
    for d in decisions:
        if d["outcome"] in ("recheck", "full_check", "deferred"):
            continue
        cls = classify(w, ops.get(d["diff_id"]))
        tally[f"{cls} | {d['outcome']} | {d['stage']} | {reason_pattern(d['reason'])}"] += 1
    return tally


def right_rejections(w: ReferenceWorld, ops: dict[str, list[dict[str, Any]]],
                     decisions: list[dict[str, Any]]) -> Counter[str]:
    """The evidence behind each acceptance-test rejection of a diff holding right rules: ``wins-losses/n``."""
    tally: Counter[str] = Counter()
    for d in decisions:
        numbers = d.get("numbers", {})
        if d["outcome"] == "rejected" and "wins" in numbers and classify(w, ops.get(d["diff_id"])) == "right":
            tally[f"{numbers['wins']:.0f}-{numbers['losses']:.0f}/{numbers.get('n', 0):.0f}"] += 1
    return tally


def run_agentgrad(job: Job, w: ReferenceWorld, agent: WorldAgent, trace: Trace) -> dict[str, Any]:
    asynchronous = job.system == "agentgrad_async"
    run = evolve_world(agent, trace, call_budget(job.calls), workers_for(job.workers, asynchronous),
                       asynchronous=asynchronous, seed=job.seed)
    usage = run.result.usage
    return {**outcome(w, trace, list(run.texts.values())), "wall": run.wall, "versions": len(run.texts) - 1,
            "rollouts": usage.rollouts, "gate_evals": usage.gate_evals, "proposals": usage.proposals,
            "verdicts": dict(verdicts(w, run.ops, run.verdicts)),
            "right_rejections": dict(right_rejections(w, run.ops, run.verdicts)),
            "frontier": dict(Counter(classify(w, run.ops.get(d))
                                     for d in {d for e in run.result.frontier for d in e.diff_ids})),
            "counts": {k: run.result.counts.get(k, 0) for k in COUNTS}}


def run_gepa(job: Job, w: ReferenceWorld, agent: WorldAgent, trace: Trace) -> dict[str, Any]:
    run = optimize_gepa(agent, trace, job.workers, job.calls, cap=GEPA_CAP_S, seed=job.seed,
                        reflect_all=job.system == "gepa_reflect_all")
    pool = [text for _, text in run.listener.val.values()]
    return {**outcome(w, trace, pool), "wall": run.wall, "versions": len(pool) - 1,
            "iterations": run.listener.iterations, "accepted": run.listener.accepted,
            "proposals": agent.proposals, "hit_time_cap": run.wall >= GEPA_CAP_S}


def run_job(job: Job) -> dict[str, Any]:
    """One run, measured (in a worker process)."""
    w = build(job)
    agent = WorldAgent(w, median=MEDIAN, sigma=SIGMA, slow_proposer=job.slow_proposer)
    trace = Trace(w, job.calls)
    row = (run_gepa if job.system.startswith("gepa") else run_agentgrad)(job, w, agent, trace)
    return {"world": job.world, "system": job.system, "workers": job.workers, "seed": job.seed,
            "budget": job.calls, "calls": trace.calls, **row}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"1 seed, worlds {', '.join(QUICK_WORLDS)}")
    parser.add_argument("--worlds", nargs="+", choices=sorted(WORLDS), help="named worlds (default: all)")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, help=f"default: {' '.join(DEFAULT_SYSTEMS)}")
    parser.add_argument("--seeds", type=int, help="draws 0..n-1 of every world (default 5, quick 1)")
    parser.add_argument("--workers", nargs="+", type=int, help=f"default: {' '.join(map(str, WORKERS))}")
    parser.add_argument("--drawn", type=int, default=0, help="also worlds drawn0..drawn<n-1> of --family "
                        "(agentgrad.testing.drawn: random shapes, to check figures carry over beyond the presets)")
    parser.add_argument("--family", type=int, default=drawn.HELD_OUT, help=f"the drawn worlds' family (default "
                        f"{drawn.HELD_OUT}, the held-out one: measure there; develop on another, e.g. {drawn.DEV})")
    parser.add_argument("--only-drawn", action="store_true", help="the drawn worlds alone, no named preset")
    parser.add_argument("--free-text", action="store_true", help="free-text skills: rules appended as bullets "
                        "(AppendRules, evolve's default strategy), the solver following each category's last line")
    parser.add_argument("--bundle", type=float, default=0.0, help="the share of proposals that carry a junk tip "
                        "besides (WorldConfig.p_bundle)")
    parser.add_argument("--flaky", type=float, default=0.0, help="the share of tasks whose answers flip at "
                        "--flaky-noise instead of the world's noise (WorldConfig.flaky_share: borderline inputs)")
    parser.add_argument("--flaky-noise", type=float, default=0.3, help="the flaky tasks' flip rate")
    parser.add_argument("--slow-proposer", type=float, default=1.0, help="how many times longer a proposal "
                        "takes than a solver call, in the median (a reflection model larger than the solver)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every world's call budget")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs at once (processes)")
    parser.add_argument("--out", type=Path, default=OUT / "learning_bench.json", help="the JSON to write")
    args = parser.parse_args()
    if not args.slow_proposer > 0:
        parser.error(f"--slow-proposer must be > 0, got {args.slow_proposer}")
    for name in ("flaky", "flaky_noise"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    named = [] if args.only_drawn else (args.worlds or list(QUICK_WORLDS if args.quick else WORLDS))
    args.worlds = named + [drawn.name(i) for i in range(args.drawn)]
    args.systems = args.systems or list(DEFAULT_SYSTEMS)
    args.seeds = args.seeds or (1 if args.quick else 5)
    args.workers = args.workers or list(WORKERS)
    return args


def jobs_for(args: argparse.Namespace) -> tuple[list[Job], list[str]]:
    """Every run asked for (longest first), and the notes about systems left out."""
    notes, systems = [], list(args.systems)
    if any(s.startswith("gepa") for s in systems) and not gepa_available():
        systems = [s for s in systems if not s.startswith("gepa")]
        notes.append("gepa systems skipped: gepa is not importable in this environment; run this script in "
                     ".venv-gepa (make bench-learning builds it from benchmarks/requirements-gepa.txt)")
    jobs = [Job(w, s, n, seed, max(1, round(budget_of(w, args.family) * args.scale)), args.family, args.free_text,
                args.bundle, args.slow_proposer, (args.flaky, args.flaky_noise))
            for w in args.worlds for s in systems for n in args.workers for seed in range(args.seeds)]
    jobs.sort(key=lambda j: -j.calls / math.sqrt(j.workers))
    return jobs, notes


def run_all(jobs: list[Job], processes: int) -> list[dict[str, Any]]:
    """Every job, `processes` at a time, in a stable order (world, system, workers, seed)."""
    rows, started = [], time.perf_counter()
    with ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn")) as pool:
        for done, row in enumerate(pool.map(run_job, jobs), start=1):
            rows.append(row)
            print(f"[{time.perf_counter() - started:6.0f} s] {done}/{len(jobs)} {row['world']} {row['system']} "
                  f"S={row['workers']} seed {row['seed']}: test {row['test']:.3f} ({row['calls']} calls, "
                  f"{row['wall']:.1f} s)", flush=True)
    order = {name: i for i, name in enumerate(WORLDS)}
    rank = {name: order.get(name, len(order) + (drawn.parse(name) or 0)) for name in {r["world"] for r in rows}}
    rows.sort(key=lambda r: (rank[r["world"]], SYSTEMS.index(r["system"]), r["workers"], r["seed"]))
    return rows


def main() -> None:
    args = arguments()
    jobs, notes = jobs_for(args)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    started = time.perf_counter()
    rows = run_all(jobs, max(1, args.jobs))
    summary = summarise(rows)
    checks = goal_checks(summary, rows)
    gepa_version = importlib.metadata.version("gepa") if gepa_available() else None
    config = {"worlds": {name: {**world_config(name, args.family).to_dict(), "calls": budget_of(name, args.family)}
                         for name in args.worlds}, "family": args.family,
              "systems": sorted({j.system for j in jobs}, key=SYSTEMS.index), "workers": args.workers,
              "seeds": list(range(args.seeds)), "scale": args.scale, "median_latency_s": MEDIAN, "sigma": SIGMA,
              "slow_proposer": args.slow_proposer, "flaky": {"share": args.flaky, "noise": args.flaky_noise},
              "target_share_of_optimum": TARGET_SHARE, "gepa_version": gepa_version, "notes": notes,
              "seconds": round(time.perf_counter() - started, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": config, "summary": summary, "checks": checks, "runs": rows},
                                   indent=1))
    png = args.out.with_suffix(".png")
    plotted = plot(rows, png)
    print(tables(summary, checks))
    print(f"wrote {args.out}" + (f" and {png.name}" if plotted else "") + f" in {config['seconds']:.0f} s")


if __name__ == "__main__":
    main()

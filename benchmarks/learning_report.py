"""The report of learning_bench.py: a summary per (world, workers, system) over seeds, the goal checks, markdown
tables, the plot, and how agentgrad's verdicts are tallied by what each diff held."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentgrad.testing.world import FORMAT_KEY, ReferenceWorld

GAIN_RATIO = 1.3
BASELINE = "gepa"


def classify(w: ReferenceWorld, ops: Sequence[Mapping[str, Any]] | None) -> str:
    """What a diff held: 'wrong' (a wrong method), 'right' (a category's right rule), 'format' (the format rule),
    'override' (override lines only), 'junk', 'other' (a deletion, ...) or 'unknown' (a diff the optimizer made,
    e.g. by fusing)."""
    if ops is None:
        return "unknown"
    lines = [str(op["new"]) for op in ops if op.get("new")]
    counts = w.audit("\n".join(lines))
    if counts["wrong"]:
        return "wrong"
    if counts["right"]:
        categories = {line.split(":", 1)[0].strip(" -*").casefold() for line in lines}
        return "right" if categories & set(w.methods) else "format" if FORMAT_KEY in categories else "override"
    return "junk" if counts["junk"] else "other"


def reason_pattern(reason: str) -> str:
    """A verdict's reason with its numbers and ids blanked, so that equal reasons count together."""
    return re.sub(r"\b[0-9a-f]{8,}\b|[-+]?\d+(\.\d+)?(e-?\d+)?", "#", reason)[:110]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _mean_of(rows: list[dict[str, Any]], key: str) -> float | None:
    """The mean of `key` over rows that have it (rows written before it was measured have not)."""
    values = [r[key] for r in rows if key in r]
    return statistics.fmean(values) if values else None


def cell(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One (world, workers, system) over its seeds."""
    tests, reached = [r["test"] for r in rows], [r for r in rows if r["calls_to_target"] is not None]
    return {"seeds": len(rows), "test_mean": statistics.fmean(tests), "test_min": min(tests), "test_max": max(tests),
            "gain_mean": statistics.fmean(r["gain"] for r in rows),
            "expected_mean": _mean_of(rows, "test_expected"), "expected_gain_mean": _mean_of(rows, "gain_expected"),
            "optimum_expected_mean": _mean_of(rows, "optimum_expected"),
            "start_mean": statistics.fmean(r["start_test"] for r in rows),
            "optimum_mean": statistics.fmean(r["optimum_test"] for r in rows), "reached": len(reached),
            "calls_to_target_median": _median([r["calls_to_target"] for r in reached]),
            "seconds_to_target_median": _median([r["seconds_to_target"] for r in reached]),
            "right_rules_mean": statistics.fmean(r["rules"]["right"] for r in rows),
            "wrong_rules_final": sum(r["rules"]["wrong"] for r in rows),
            "junk_rules_mean": statistics.fmean(r["rules"]["junk"] for r in rows),
            "wrong_committed": sum(r["wrong_committed"] for r in rows),
            "calls_mean": statistics.fmean(r["calls"] for r in rows),
            "wall_mean": statistics.fmean(r["wall"] for r in rows)}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Cells keyed ``world/workers/system``, and agentgrad's verdict tallies per system (and what the changes left
    on its runs' frontiers held: right rules, junk, ...)."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["world"], row["workers"], row["system"]), []).append(row)
    verdicts: dict[str, Counter[str]] = {}
    evidence: dict[str, Counter[str]] = {}
    frontier: dict[str, Counter[str]] = {}
    for row in rows:
        verdicts.setdefault(row["system"], Counter()).update(row.get("verdicts", {}))
        evidence.setdefault(row["system"], Counter()).update(row.get("right_rejections", {}))
        frontier.setdefault(row["system"], Counter()).update(row.get("frontier", {}))
    return {"cells": {f"{w}/{n}/{s}": {"world": w, "workers": n, "system": s, **cell(g)}
                      for (w, n, s), g in groups.items()},
            "verdicts": {s: dict(c.most_common()) for s, c in verdicts.items() if c},
            "right_rejections": {s: dict(c.most_common()) for s, c in evidence.items() if c},
            "frontier": {s: dict(c.most_common()) for s, c in frontier.items() if c}}


def _compare(ours: list[tuple[dict[str, Any], dict[str, Any]]], acc: str, gain: str) -> dict[str, Any]:
    """Accuracy (`acc`) against gepa's in each cell, and the mean `gain` against gepa's, overall and per cell."""
    behind = [f"{a['world']}/S={a['workers']}: {a[acc]:.3f} < {b[acc]:.3f}" for a, b in ours if a[acc] < b[acc] - 1e-9]
    ratios = {f"{a['world']}/{a['workers']}": a[gain] / b[gain] if b[gain] > 0 else None for a, b in ours}
    overall = statistics.fmean(a[gain] for a, _ in ours) / max(1e-9, statistics.fmean(b[gain] for _, b in ours))
    low = [k for k, v in ratios.items() if v is not None and v < GAIN_RATIO]
    room = [(a, b) for a, b in ours if attainable(a, acc) >= GAIN_RATIO * b[gain] - 1e-9]  # 1.3x can show there
    headroom = statistics.fmean(a[gain] for a, _ in room) / max(1e-9, statistics.fmean(b[gain] for _, b in room)) \
        if room else None
    share = {"ours": _share([a for a, _ in ours], acc, gain), "gepa": _share([b for _, b in ours], acc, gain)}
    return {"accuracy_at_least_gepa": not behind, "behind": behind, "gain_ratio_overall": overall,
            "gain_ratio_ok": overall >= GAIN_RATIO, "gain_ratios": ratios, "cells_below_ratio": low,
            "gain_ratio_headroom": headroom, "ceiling_cells": [f"{a['world']}/{a['workers']}" for a, b in ours
                                                               if (a, b) not in room],
            "attainable_share": share}


def _share(cells: list[dict[str, Any]], acc: str, gain: str) -> float | None:
    """The mean over `cells` of the gain as a share of what could be gained there (None: nothing could)."""
    shares = [c[gain] / room for c in cells if (room := attainable(c, acc)) > 0]
    return statistics.fmean(shares) if shares else None


def attainable(cell: Mapping[str, Any], acc: str) -> float:
    """The most a system can gain in `cell`: the optimum's accuracy less the start's (noise-averaged for
    ``expected_mean``)."""
    if acc == "test_mean":
        return float(cell["optimum_mean"] - cell["start_mean"])
    start = cell["expected_mean"] - cell["expected_gain_mean"]
    return float(cell["optimum_expected_mean"] - start)


def goal_checks(summary: Mapping[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy ≥ gepa's in every (world, workers); mean gain ≥ 1.3 × gepa's; no wrong rule committed."""
    cells = summary["cells"]
    mine = sorted({c["system"] for c in cells.values() if c["system"].startswith("agentgrad")})
    checks: dict[str, Any] = {}
    pairs = [(c, cells.get(f"{c['world']}/{c['workers']}/{BASELINE}")) for c in cells.values()
             if c["system"] in mine]
    pairs = [(a, b) for a, b in pairs if b is not None]
    for system in mine:
        ours = [(a, b) for a, b in pairs if a["system"] == system]
        if not ours:
            continue
        checks[system] = _compare(ours, "test_mean", "gain_mean")
        if all(a["expected_mean"] is not None and b["expected_mean"] is not None for a, b in ours):
            checks[system]["noise_averaged"] = _compare(ours, "expected_mean", "expected_gain_mean")
    for system in mine:
        wrong = sum(r["wrong_committed"] for r in rows if r["system"] == system)
        checks.setdefault(system, {})["wrong_committed"] = wrong
    for system, per in per_call(rows).items():
        checks.setdefault(system, {})["per_call"] = per
    versus = _async_vs_sync(cells)
    if versus:
        checks["async_vs_sync"] = versus
    return checks


def calls_to(rows: list[dict[str, Any]], level: float, budget: int, key: str) -> int | None:
    """The fewest solver calls at which the mean over `rows` of the best-so-far curve `key` reaches `level` (None:
    not within `budget`). The mean curve only moves where a row's does, so those points are all it needs."""
    points = sorted({int(c) for r in rows for c, _ in r[key] if c <= budget} | {budget})
    return next((c for c, v in zip(points, _mean_curve(rows, points, key), strict=True) if v >= level - 1e-9), None)


def per_call(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Learning per call against gepa: per (world, workers) where gepa learned anything, the calls each agentgrad
    system's mean curve takes to reach gepa's mean accuracy at the budget, against the calls gepa's own curve takes
    (gepa's over ours: 2.0 means the same accuracy for half the calls). Where gepa ends at the optimum, the gain at
    the budget cannot differ; this still can. The curves are noise-averaged (what each text learned, without its
    own draw of answer noise) where the rows have them, so that a level is not one lucky draw."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["world"], row["workers"], row["system"]), []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for (world, workers, system), mine in groups.items():
        theirs = groups.get((world, workers, BASELINE))
        if not system.startswith("agentgrad") or not theirs:
            continue
        budget = int(theirs[0]["budget"])
        key = "curve_expected" if all("curve_expected" in r for r in mine + theirs) else "curve"
        start = _mean_curve(theirs, [0], key)[0]
        level = _mean_curve(theirs, [budget], key)[0]
        if level <= start + 1e-9:
            continue  # gepa learned nothing here: no calls to compare
        gepa, ours = calls_to(theirs, level, budget, key), calls_to(mine, level, budget, key)
        entry = out.setdefault(system, {"cells": {}, "unreached": []})
        entry["cells"][f"{world}/{workers}"] = {"level": round(level, 4), "gepa_calls": gepa, "calls": ours,
                                                "ratio": None if not ours or not gepa else gepa / ours}
        if ours is None:
            entry["unreached"].append(f"{world}/{workers}")
    for entry in out.values():
        ratios = [c["ratio"] for c in entry["cells"].values() if c["ratio"]]
        entry["ratio_median"] = statistics.median(ratios) if ratios else None
        entry["ratio_geomean"] = statistics.geometric_mean(ratios) if ratios else None
        entry["ratio_min"] = min(ratios) if ratios else None
    return out


def _async_vs_sync(cells: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The asynchronous runtime's mean gain over the synchronous one's (cells both ran), and the median over
    those cells of its seconds to the target over theirs (cells where both reached it)."""
    pairs = [(c, cells.get(f"{c['world']}/{c['workers']}/agentgrad_sync")) for c in cells.values()
             if c["system"] == "agentgrad_async"]
    both = [(a, s) for a, s in pairs if s is not None]
    if not both:
        return {}
    gain = statistics.fmean(a["gain_mean"] for a, _ in both) / max(1e-9, statistics.fmean(s["gain_mean"]
                                                                                          for _, s in both))
    times = [a["seconds_to_target_median"] / s["seconds_to_target_median"] for a, s in both
             if a["seconds_to_target_median"] and s["seconds_to_target_median"]]
    return {"gain_ratio": gain, "seconds_to_target_ratio_median": statistics.median(times) if times else None,
            "cells": len(both)}


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _systems(cells: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(c["system"] for c in cells.values()))


def _rows(cells: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, int]]:
    return list(dict.fromkeys((c["world"], c["workers"]) for c in cells.values()))


def accuracy_table(cells: Mapping[str, Mapping[str, Any]]) -> str:
    """World × workers rows; per system: test accuracy mean (min–max) and mean gain over the start."""
    systems = _systems(cells)
    head = "| world | S | start | opt | " + " | ".join(f"{s} acc (min-max) | gain" for s in systems) + " |"
    lines = [head, "|" + "---|" * (4 + 2 * len(systems))]
    for world, workers in _rows(cells):
        mine = [cells.get(f"{world}/{workers}/{s}") for s in systems]
        first = next(c for c in mine if c is not None)
        parts = [f"{c['test_mean']:.3f} ({c['test_min']:.2f}-{c['test_max']:.2f}) | {c['gain_mean']:+.3f}"
                 if c else "- | -" for c in mine]
        lines.append(f"| {world} | {workers} | {first['start_mean']:.2f} | {first['optimum_mean']:.2f} | "
                     + " | ".join(parts) + " |")
    return "\n".join(lines)


def expected_table(cells: Mapping[str, Mapping[str, Any]]) -> str:
    """World × workers rows; per system: the noise-averaged accuracy of the final text (`expected_score`)."""
    systems = _systems(cells)
    lines = ["| world | S | opt | " + " | ".join(systems) + " |", "|" + "---|" * (3 + len(systems))]
    for world, workers in _rows(cells):
        mine = [cells.get(f"{world}/{workers}/{s}") for s in systems]
        first = next(c for c in mine if c is not None)
        lines.append(f"| {world} | {workers} | {_num(first['optimum_expected_mean'], 3)} | "
                     + " | ".join("-" if c is None else _num(c["expected_mean"], 3) for c in mine) + " |")
    return "\n".join(lines)


def detail_table(cells: Mapping[str, Mapping[str, Any]]) -> str:
    """Per system: seeds reaching the target, median calls and seconds to it, rules right/wrong/junk at the end,
    wrong rules ever committed."""
    systems = _systems(cells)
    head = "| world | S | " + " | ".join(f"{s} reached, calls, s to target | right/wrong/junk, wrong ever"
                                         for s in systems) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(systems))]
    for world, workers in _rows(cells):
        parts = []
        for s in systems:
            c = cells.get(f"{world}/{workers}/{s}")
            parts.append("- | -" if c is None else
                         f"{c['reached']}/{c['seeds']}, {_num(c['calls_to_target_median'], 0)}, "
                         f"{_num(c['seconds_to_target_median'], 1)} | {c['right_rules_mean']:.1f}/"
                         f"{c['wrong_rules_final']}/{c['junk_rules_mean']:.1f}, {c['wrong_committed']}")
        lines.append(f"| {world} | {workers} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def per_call_table(checks: Mapping[str, Any]) -> str:
    """World × workers rows: gepa's mean accuracy at the budget, the calls its mean curve takes to reach it, and
    per agentgrad system the calls its own takes (gepa's over ours in brackets)."""
    systems = [s for s, c in checks.items() if isinstance(c, Mapping) and c.get("per_call")]
    if not systems:
        return ""
    keys = list(dict.fromkeys(k for s in systems for k in checks[s]["per_call"]["cells"]))
    lines = ["| world/S | gepa acc | gepa calls | " + " | ".join(f"{s} calls (ratio)" for s in systems) + " |",
             "|" + "---|" * (3 + len(systems))]
    for key in keys:
        first = next(checks[s]["per_call"]["cells"][key] for s in systems if key in checks[s]["per_call"]["cells"])
        parts = []
        for s in systems:
            c = checks[s]["per_call"]["cells"].get(key)
            parts.append("-" if c is None else f"{_num(c['calls'])} ({_num(c['ratio'])})")
        lines.append(f"| {key} | {first['level']:.3f} | {first['gepa_calls']} | " + " | ".join(parts) + " |")
    return "\n".join(lines)


def tables(summary: Mapping[str, Any], checks: Mapping[str, Any], top: int = 8) -> str:
    """Both tables, the goal checks and the most common verdicts on right rules."""
    cells = summary["cells"]
    out = ["## Held-out accuracy at the budget (mean over seeds)", accuracy_table(cells), "",
           "## Noise-averaged held-out accuracy (the final text's rules, without its own draw of answer noise)",
           expected_table(cells), "",
           "## Target (80% of optimum), rules in the final text (sum of wrong over seeds)", detail_table(cells), "",
           "## Solver calls to reach gepa's mean accuracy at the budget (noise-averaged mean curves over seeds)",
           per_call_table(checks), "", "## Goal checks (against gepa)"]
    for system, check in checks.items():
        if system == "async_vs_sync":
            out.append(f"- async against sync, {check['cells']} cells: mean gain ratio {_num(check['gain_ratio'])} "
                       f"(goal >= 1); median seconds-to-target ratio "
                       f"{_num(check['seconds_to_target_ratio_median'])} (goal < 1)")
            continue
        if "accuracy_at_least_gepa" not in check:
            out.append(f"- {system}: no gepa runs to compare with; wrong rules committed: {check['wrong_committed']}")
            continue
        out.append(f"- {system}: accuracy >= gepa everywhere: {check.get('accuracy_at_least_gepa')} "
                   f"{check.get('behind', [])}; gain ratio {_num(check.get('gain_ratio_overall'))} "
                   f"(goal {GAIN_RATIO}; cells below: {check.get('cells_below_ratio', [])}); "
                   f"{_num(check.get('gain_ratio_headroom'))} over the cells where the optimum leaves room for "
                   f"1.3x gepa's gain (no such room in: {check.get('ceiling_cells', [])}); share of the "
                   f"attainable gain {_num(check.get('attainable_share', {}).get('ours'))} against gepa's "
                   f"{_num(check.get('attainable_share', {}).get('gepa'))}; "
                   f"wrong rules committed: {check['wrong_committed']}")
        per = check.get("per_call")
        if per:
            out.append(f"  - calls to reach gepa's accuracy at the budget, gepa's over ours: median "
                       f"{_num(per['ratio_median'])}, geometric mean {_num(per['ratio_geomean'])}, lowest "
                       f"{_num(per['ratio_min'])} over {len(per['cells'])} cells (never reached: {per['unreached']})")
        averaged = check.get("noise_averaged")
        if averaged:
            out.append(f"  - noise-averaged (what the final text learned, without its own noise draw): accuracy >= "
                       f"gepa everywhere: {averaged['accuracy_at_least_gepa']} {averaged['behind']}; gain ratio "
                       f"{_num(averaged['gain_ratio_overall'])} (cells below: {averaged['cells_below_ratio']})")
    for system, tally in summary["verdicts"].items():
        right = [(k, v) for k, v in tally.items() if k.split(" | ")[0] in ("right", "override")]
        out += ["", f"## {system}: final verdicts on diffs holding right rules (class | outcome | stage | reason)"]
        out += [f"- {v} x {k}" for k, v in sorted(right, key=lambda kv: -kv[1])[:top]]
        common = list(summary["right_rejections"].get(system, {}).items())[:top]
        if common:
            out.append("- evidence of the right rules the acceptance test rejected (wins-losses/n: count): "
                       + ", ".join(f"{k}: {v}" for k, v in common))
        left = summary.get("frontier", {}).get(system)
        if left:
            out.append("- changes left on the runs' frontiers (`Result.frontier`), by what they held: "
                       + ", ".join(f"{k}: {v}" for k, v in left.items()))
    return "\n".join(out)


def _mean_curve(rows: list[dict[str, Any]], grid: list[int], key: str = "curve") -> list[float]:
    """Mean over rows of the step curve `key` (test accuracy of the best text so far; "curve_expected": its
    noise-averaged accuracy) at each call count of `grid`."""
    def at(curve: list[list[float]], calls: int) -> float:
        return [r for c, r in curve if c <= calls][-1]
    return [statistics.fmean(at(r[key], g) for r in rows) for g in grid]


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Mean held-out accuracy against solver calls: one panel per world, a colour per system, a line style per
    worker count."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    worlds = list(dict.fromkeys(r["world"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    workers = sorted({r["workers"] for r in rows})
    styles = dict(zip(workers, (":", "--", "-", "-."), strict=False))
    cols = min(4, len(worlds))
    fig, axes = plt.subplots((len(worlds) + cols - 1) // cols, cols, figsize=(4.2 * cols, 3.4 *
                             ((len(worlds) + cols - 1) // cols)), squeeze=False)
    for ax, world in zip(axes.flat, worlds, strict=False):
        mine = [r for r in rows if r["world"] == world]
        budget = mine[0]["budget"]
        grid = sorted({round(budget * i / 60) for i in range(61)})
        for i, system in enumerate(systems):
            for n in workers:
                group = [r for r in mine if r["system"] == system and r["workers"] == n]
                if group:
                    ax.step(grid, _mean_curve(group, grid), where="post", color=f"C{i}",
                            linestyle=styles.get(n, "-"), label=f"{system} S={n}")
        ax.axhline(mine[0]["target"], color="grey", linestyle=":", linewidth=1)
        ax.set_title(world, fontsize=10)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("solver calls")
        ax.set_ylabel("test accuracy")
    for ax in list(axes.flat)[len(worlds):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    fig.suptitle("held-out accuracy against solver calls (mean over seeds)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True

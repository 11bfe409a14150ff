"""`agentgrad report`: the PNG and the self-contained HTML carry the run's series; the numbers are checked against
the store and the event log, not just the files' existence."""

from __future__ import annotations

import base64
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import image

from agentgrad.runtime.frontier import frontier
from agentgrad.store.sqlite import SQLiteStore
from tests.cli.helpers import ARTIFACT, cli, dispatched, events
from tests.service.support import NEAR_MISS, add_near_miss


def _report(run_dir: Path, out: Path) -> tuple[bytes, str, dict[str, Any]]:
    result = cli("report", run_dir, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    paths = json.loads(result.stdout)
    assert paths == {"png": str(out / "report.png"), "html": str(out / "report.html")}
    page = (out / "report.html").read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)
    assert match is not None
    return (out / "report.png").read_bytes(), page, json.loads(match.group(1))


def _base_scores(run_dir: Path, version: int) -> dict[str, float]:
    scores: dict[str, float] = {}
    for _, step in events(run_dir, ["step"]):
        for candidate in step["candidates"]:
            if candidate["evidence"]["base_version"] == version:
                scores.update({task: base for task, base, _ in candidate["evidence"]["rows"]})
    return scores


def test_png_is_a_real_plot_and_the_html_embeds_it(finished_run: Path, tmp_path: Path) -> None:
    png, page, _ = _report(finished_run, tmp_path / "r")
    pixels = image.imread(io.BytesIO(png), format="png")
    assert pixels.shape[0] > 500 and pixels.shape[1] > 500
    assert float(np.std(pixels)) > 0.05  # lines and bars, not a blank canvas
    embedded = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert embedded is not None and base64.b64decode(embedded.group(1)) == png
    assert "<link" not in page and "src=\"http" not in page  # self-contained


def test_report_series_match_the_store_and_the_log(finished_run: Path, tmp_path: Path) -> None:
    _, page, data = _report(finished_run, tmp_path / "r")
    with SQLiteStore(finished_run, git=False) as store:
        history = store.history(ARTIFACT)
        latest = {d.diff_id: d.outcome.value for d in store.decisions()}
    assert [(row["version"], row["diff"]) for row in data["lineage"]] == [(v.number, v.diff_id) for v in history]
    for row, version in zip(data["lineage"][1:], history[1:], strict=True):
        assert any(op.removeprefix("add - ") in version.text for op in row["ops"])
        assert row["reason"].startswith("significant") and row["diff"] in page
    assert data["decisions"]["accepted"] == len(history) - 1
    assert sum(data["decisions"].values()) == len(latest)
    validation = data["reward"]["validation"]
    base0 = _base_scores(finished_run, 0)
    assert validation[0]["version"] == 0 and math.isclose(validation[0]["reward"], sum(base0.values()) / len(base0))
    assert {p["version"] for p in validation} <= {v.number for v in history}
    assert [p["t"] for p in validation] == sorted(p["t"] for p in validation)
    finished = events(finished_run, ["finished"])[-1][1]
    assert [p["reward"] for p in data["reward"]["held_out"]] == [finished["baseline"], finished["test_reward"]]
    assert data["reward"]["held_out"][-1]["rollouts"] == dispatched(finished_run, "rollouts")


def test_the_report_carries_the_runs_frontier_as_data_and_a_table(finished_run: Path, tmp_path: Path) -> None:
    add_near_miss(finished_run, ARTIFACT)
    _, page, data = _report(finished_run, tmp_path / "r")
    with SQLiteStore(finished_run, git=False) as store:
        expected = frontier(store.decisions(artifact_id=ARTIFACT), store.evidence)
    assert set(NEAR_MISS) <= {e.task_id for e in expected}
    assert data["frontier"] == [{"task_id": e.task_id, "diff_ids": list(e.diff_ids), "wins": e.wins}
                                for e in expected]
    table = page.split("<h2>Frontier</h2>", 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == len(expected) + 1 and all(e.task_id in table for e in expected)


def test_throughput_and_activity_account_for_every_call(finished_run: Path, tmp_path: Path) -> None:
    _, _, data = _report(finished_run, tmp_path / "r")
    done = [p for _, p in events(finished_run, ["done"])]
    series = data["throughput"]
    run_calls = sum(1 for p in done if p["kind"] in ("rollouts", "gate_evals"))
    assert math.isclose(sum(series["run_calls_per_s"]) * series["bin"], run_calls)
    assert math.isclose(sum(series["rollouts_per_s"]) * series["bin"], dispatched(finished_run, "rollouts"))
    activity = data["activity"]
    slots = activity["slots"]
    assert slots == 6  # workers = 4: 4 rollout + 2 gate slots
    assert len(activity["t"]) == len(activity["queued"]) and all(len(v) == len(activity["t"])
                                                                  for v in activity["running"].values())
    assert max(activity["running"]["rollouts"]) >= 1 and max(activity["running"]["gate_evals"]) >= 1
    assert max(activity["running"]["rollouts"]) <= slots and max(activity["running"]["gate_evals"]) <= slots
    assert data["usage"]["rollouts"] == {"used": dispatched(finished_run, "rollouts"), "limit": 48.0}


def test_report_on_a_killed_run_has_its_lineage_and_no_held_out_number(killed_run: Path, tmp_path: Path) -> None:
    _, _, data = _report(killed_run, tmp_path / "r")
    assert [row["version"] for row in data["lineage"]] == [0, 1, 2]
    assert data["reward"]["held_out"] == [] and data["state"] == "unfinished"
    assert (killed_run / "report").exists() is False  # --out was honoured


HOSTILE = ["$\\frac{$", "costs $5 ... $10", "a \\ backslash", "<b>bold</b></script>", "emoji 🚀", "bell\x07\x00"]


def test_text_full_of_dollars_backslashes_markup_emoji_and_controls_is_shown_literally(finished_run: Path,
                                                                                        tmp_path: Path) -> None:
    from agentgrad.cli.report import literal, render_html, render_png

    _, _, data = _report(finished_run, tmp_path / "r")
    data["artifact"] = " ".join(HOSTILE)
    for row in data["lineage"]:
        row["ops"] = [*row.get("ops", []), *HOSTILE]
        row["reason"] = " ".join(HOSTILE)
    png = render_png(data)  # matplotlib's mathtext would raise on "$\frac{$"
    assert image.imread(io.BytesIO(png), format="png").shape[0] > 500
    page = render_html(data, png)
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert page.count("</script>") == 1  # the data block cannot be closed early by text in it
    assert literal("bell\x07\x00 $x$\n") == "bell\ufffd\ufffd $x$\n"

"""`agentgrad report`: a PNG of six plots (matplotlib, no display needed) and one self-contained HTML file.

The HTML embeds the PNG (base64), tables of the lineage, the decision mix, the frontier and the budget, and the
report's data as JSON in ``<script type="application/json" id="data">``, so it can be read back by a script.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

STAGE_COLOURS = {"rollouts": "#4c72b0", "proposals": "#dd8452", "gate_evals": "#55a868"}


def literal(text: str) -> str:
    """User or model text as a plot shows it literally: control characters (but newlines) as U+FFFD; with
    ``parse_math=False`` at every call, ``$...$`` and backslashes are plain characters, not math."""
    return "".join(c if c == "\n" or c.isprintable() else "\ufffd" for c in text)


def _reward(ax: Axes, data: dict[str, Any], axis: str, label: str) -> None:
    val, held = data["reward"]["validation"], data["reward"]["held_out"]
    if val:
        ax.step([p[axis] for p in val], [p["reward"] for p in val], where="post", marker="o", label="validation")
    if held:
        ax.plot([p[axis] for p in held], [p["reward"] for p in held], "s", color="#c44e52", label="held-out")
        for point in held:
            ax.annotate(literal(f"{point['label']} {point['reward']:.2f}"), (point[axis], point["reward"]),
                        textcoords="offset points", xytext=(-8, 6), ha="right", fontsize=8, parse_math=False)
    ax.set(xlabel=label, ylabel="reward", ylim=(-0.02, 1.02), title=f"reward over {label.split(' (')[0]}")
    if val or held:
        ax.legend(loc="lower right")


def _throughput(ax: Axes, data: dict[str, Any]) -> None:
    series = data["throughput"]
    ax.step(series["t"], series["run_calls_per_s"], where="post", label="run calls/s")
    ax.step(series["t"], series["rollouts_per_s"], where="post", label="rollouts/s", alpha=0.7)
    if series["limit"]:
        ax.axhline(series["limit"], color="#c44e52", linestyle="--", label="limit (slots / mean call time)")
    ax.set(xlabel="wall time (s)", ylabel="calls per second", title="throughput")
    ax.legend(loc="upper right")


def _activity(ax: Axes, data: dict[str, Any]) -> None:
    series = data["activity"]
    for kind, peaks in series["running"].items():
        ax.step(series["t"], peaks, where="post", label=kind.replace("_", " "), color=STAGE_COLOURS.get(kind))
    ax.step(series["t"], series["queued"], where="post", label="waiting for a slot", color="#999999", alpha=0.6)
    if series["slots"]:
        ax.axhline(series["slots"], color="grey", linestyle=":", label="run slots")
    ax.set(xlabel="wall time (s)", ylabel="calls running (peak)", title="worker activity per stage")
    ax.legend(loc="upper right")


def _mix(ax: Axes, data: dict[str, Any]) -> None:
    items = sorted(data["decisions"].items(), key=lambda kv: -kv[1])
    items += sorted(((f"no diff: {k}", v) for k, v in data["not_proposed"].items()), key=lambda kv: -kv[1])
    names, counts = [k for k, _ in items], [v for _, v in items]
    ax.barh(names[::-1], counts[::-1], color="#8172b3")
    ax.set(xlabel="diffs", title="decision mix (latest verdict per diff)")


def _lineage(ax: Axes, data: dict[str, Any]) -> None:
    ax.axis("off")
    ax.set_title(literal(f"lineage of {data['artifact']}"), parse_math=False)
    lines = []
    for row in data["lineage"][-18:]:
        if row["diff"] is None:
            lines.append(f"v{row['version']}  (start)")
            continue
        numbers = row.get("numbers") or {}
        extra = f"  P={numbers['p']:.3f}" if "p" in numbers else ""
        change = "; ".join(row.get("ops", []))
        lines.append(f"v{row['version']}  {row['diff']}{extra}  {change[:60]}")
    ax.text(0.0, 1.0, literal("\n".join(lines)) or "no versions", va="top", ha="left", family="monospace",
            fontsize=8, transform=ax.transAxes, parse_math=False)


def render_png(data: dict[str, Any]) -> bytes:
    """The six plots as PNG bytes."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(14, 13), dpi=80, layout="constrained")
    axes = figure.subplots(3, 2)
    _reward(axes[0][0], data, "t", "wall time (s)")
    _reward(axes[0][1], data, "rollouts", "rollouts (finished)")
    _throughput(axes[1][0], data)
    _activity(axes[1][1], data)
    _mix(axes[2][0], data)
    _lineage(axes[2][1], data)
    figure.suptitle(literal(f"agentgrad run {data['run_dir']} ({data['state']})"), parse_math=False)
    out = io.BytesIO()
    figure.savefig(out, format="png", metadata={"Software": "agentgrad"})
    return out.getvalue()


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:,.4g}" if isinstance(value, float) else str(value)


def render_html(data: dict[str, Any], png: bytes) -> str:
    """One self-contained HTML page: the plots, four tables and the data as JSON."""
    lineage = [[f"v{r['version']}", r["diff"] or "(start)", "; ".join(r.get("ops", [])), r.get("reason", ""),
                _number(r.get("t"))] for r in data["lineage"]]
    mix = [[k, v] for k, v in sorted(data["decisions"].items())] + \
        [[f"no diff: {k}", v] for k, v in sorted(data["not_proposed"].items())]
    usage = [[k, _number(v["used"]), _number(v["limit"])] for k, v in data["usage"].items()]
    frontier = [[r["task_id"], ", ".join(r["diff_ids"]), r["wins"]] for r in data.get("frontier", [])]
    payload = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    title = html.escape(f"agentgrad report: {data['run_dir']}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;
margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:14px}}img{{max-width:100%}}
</style></head><body>
<h1>{title}</h1>
<p>state: {html.escape(str(data['state']))} · artifact: {html.escape(str(data['artifact']))} ·
duration: {data['duration']:.1f} s · {html.escape(str(data.get('protocol') or ''))}</p>
<img alt="reward, throughput, activity, decisions and lineage plots" src="data:image/png;base64,{
    base64.b64encode(png).decode('ascii')}">
<h2>Lineage</h2>{_table(["version", "diff", "change", "why accepted", "t (s)"], lineage)}
<h2>Decision mix</h2>{_table(["outcome", "count"], mix)}
<h2>Frontier</h2><p>Examples that only changes not committed won (one row won is one observation, not proof).</p>
{_table(["example", "changes", "rows won"], frontier)}
<h2>Budget</h2>{_table(["kind", "used", "limit"], usage)}
<script type="application/json" id="data">{payload}</script>
</body></html>
"""


def write_report(data: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``report.png`` and ``report.html`` into `out` (created); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    png = render_png(data)
    png_path, html_path = out / "report.png", out / "report.html"
    png_path.write_bytes(png)
    html_path.write_text(render_html(data, png), encoding="utf-8")
    return png_path, html_path

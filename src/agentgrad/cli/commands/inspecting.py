"""`status`, `log`, `show`, `diff`, `why` and `frontier`: read a run directory (finished, running or left by a killed
process)."""

from __future__ import annotations

import difflib
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentgrad.cli.commands.running import RunDirArg
from agentgrad.cli.output import USAGE, emit_json, fail, guarded, say
from agentgrad.cli.rundir import RunDir, RunDirError
from agentgrad.core.artifact import Kind
from agentgrad.core.decision import Outcome

if TYPE_CHECKING:
    from agentgrad.store.sqlite import SQLiteStore

Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
ArtifactOpt = Annotated[str | None, typer.Option("--artifact", "-a", help="The artifact (default: the only one).")]


def pick_artifact(store: SQLiteStore, given: str | None) -> str:
    """`given`, checked against the store, or the run's only artifact (a library run's packed artifact aside)."""
    every = store.artifact_ids()
    ids = [a for a in every if store.artifact(a).kind is not Kind.LIBRARY] if len(every) > 1 else every
    if given is not None and given in every:
        return given
    if given is not None:
        if given not in ids:
            raise RunDirError(f"no artifact {given!r} in this run; it has {ids}")
        return given
    if not ids:
        raise RunDirError("the run has no artifact yet (it stopped before it started)")
    if len(ids) > 1:
        raise RunDirError(f"the run has several artifacts; name one of {ids}")
    return ids[0]


def _number(value: float | None, kind: str) -> str:
    if value is None:
        return "–"
    return f"{value:,.2f}" if kind in ("cost", "wall_time") else f"{value:,.0f}"


def _print_status(info: dict[str, Any]) -> None:
    lines = [f"run {info['run_dir']}: {info['state']}" + (f" (pid {info['pid']})" if info["pid"] else "")]
    if info["config"]:
        lines.append(f"config: {info['config'].get('file')} · task {info['config'].get('task')} · "
                     f"model {info['config'].get('model')}")
    for artifact, heads in info["artifacts"].items():
        lines.append(f"artifact {artifact}: dev v{heads['dev']} · stable v{heads['stable']}")
    lines.append("budget: " + " · ".join(f"{k} {_number(v['used'], k)}/{_number(v['limit'], k)}"
                                         for k, v in info["budget"].items() if v["used"] or v["limit"] is not None))
    calls = info["calls"]
    lines.append("calls: " + " · ".join(f"{k} {v['done']} done" + (f", {v['open']} unfinished" if v["open"] else "")
                                        + (f", {v['errors']} errors" if v["errors"] else "") for k, v in calls.items()))
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(info["verdicts"].items())) or "none yet"
    lines.append(f"proposals: {info['proposals']} · verdicts: {verdicts} · commits: {info['commits']}")
    if info["validation_reward"]:
        val = info["validation_reward"]
        lines.append(f"validation reward: {val['first']:.3f} -> {val['last']:.3f} (best {val['best']:.3f})")
    held = info["held_out"]
    if held and held["learned"] is not None:
        lines.append(f"held-out reward: {held['baseline']:.3f} -> {held['learned']:.3f}")
    if info["checkpoint"]:
        lines.append(f"last checkpoint: step {info['checkpoint']['step']} (event {info['checkpoint']['seq']}); "
                     f"{info['resumes']} resume(s)")
    if info["error"]:
        lines.append(f"error: {info['error']}")
    if info["hint"]:
        lines.append(info["hint"])
    say("\n".join(lines))


@guarded
def status(run_dir: RunDirArg, as_json: Json = False) -> None:
    """Where a run is: state, budget used against limits, calls, verdicts, rewards, last checkpoint."""
    from agentgrad.cli.status import run_status

    target = RunDir(run_dir)
    target.require()
    info = run_status(target)
    if as_json:
        emit_json(info)
    else:
        _print_status(info)


@guarded
def log(run_dir: RunDirArg,
        outcome: Annotated[Outcome | None, typer.Option("--outcome", "-o", help="Only this outcome.")] = None,
        artifact: Annotated[str | None, typer.Option("--artifact", "-a", help="Only this artifact.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="One JSON object per decision.")] = False) -> None:
    """The decisions of a run, oldest first (every verdict on every diff, with its stage and reason)."""
    target = RunDir(run_dir)
    with target.store() as store:
        if artifact is not None:
            pick_artifact(store, artifact)
        decisions = store.decisions(artifact_id=artifact, outcome=outcome)
    for decision in decisions:
        if as_json:
            emit_json(decision.to_dict())
        else:
            say(f"{decision.diff_id}  {decision.outcome.value:<10} [{decision.stage}] {decision.reason}")
    if not decisions and not as_json:
        say("no decisions" + (" match" if outcome or artifact else " yet"))


@guarded
def show(run_dir: RunDirArg,
         artifact: Annotated[str | None, typer.Argument(help="The artifact (default: the only one).")] = None,
         version: Annotated[int | None, typer.Option("--version", "-v", help="This version.")] = None,
         stable: Annotated[bool, typer.Option("--stable", help="The stable head.")] = False) -> None:
    """Print an artifact's text: the dev head, a version, or the stable head."""
    if version is not None and stable:
        fail("--version and --stable exclude each other", USAGE)
    target = RunDir(run_dir)
    with target.store() as store:
        name = pick_artifact(store, artifact)
        text = (store.version(name, version).text if version is not None else
                store.head(name, "stable" if stable else "dev").text)
    sys.stdout.write(text)
    sys.stdout.flush()


def _version_text(store: SQLiteStore, artifact: str, spec: str) -> tuple[str, str]:
    """The text and label of a version given as a number, "dev" or "stable"."""
    if spec in ("dev", "stable"):
        head = store.head(artifact, spec)
        return head.text, f"{artifact}@{spec} (v{head.number})"
    try:
        number = int(spec.removeprefix("v"))
    except ValueError:
        fail(f"a version is a number (3 or v3), 'dev' or 'stable'; got {spec!r}", USAGE)
    return store.version(artifact, number).text, f"{artifact}@v{number}"


@guarded
def diff(run_dir: RunDirArg,
         v1: Annotated[str, typer.Argument(help="The old version (a number, dev or stable).", show_default=False)],
         v2: Annotated[str, typer.Argument(help="The new version (a number, dev or stable).", show_default=False)],
         artifact: ArtifactOpt = None) -> None:
    """A unified diff between two versions of an artifact."""
    target = RunDir(run_dir)
    with target.store() as store:
        name = pick_artifact(store, artifact)
        old, old_label = _version_text(store, name, v1)
        new, new_label = _version_text(store, name, v2)
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), old_label, new_label)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    sys.stdout.write(text or f"{old_label} and {new_label} are the same\n")


def _print_why(info: dict[str, Any]) -> None:
    diff, evidence = info["diff"], info["evidence"]
    lines = [f"diff {diff['id']} on {diff['artifact']} (made against v{diff['base']}, by {diff['author'] or '?'})"]
    if diff.get("rationale"):
        lines.append(f"  rationale: {diff['rationale']}")
    for op in diff["ops"]:
        body = op.get("new") if op.get("new") is not None else op.get("old")
        where = f"{op['member']} " if op.get("member") else ""
        lines.append(f"  {where}{op['action']} {op['scope']}: {str(body).strip()[:200]}")
    mean = evidence["mean_delta"]
    lines.append(f"evidence: {evidence['tasks']} tasks · {evidence['wins']} wins, {evidence['losses']} losses · "
                 f"mean delta {'–' if mean is None else f'{mean:+.3f}'} · base v{evidence['base_version']}"
                 + (" · full validation" if evidence["full"] else ""))
    for decision in info["decisions"]:
        lines.append(f"{decision['outcome']} [{decision['stage']}] {decision['reason']}")
        numbers = decision.get("numbers") or {}
        if numbers:
            lines.append("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in numbers.items()))
    lines.append(f"committed as v{info['version']}" if info["version"] is not None else "not committed")
    say("\n".join(lines))


@guarded
def why(run_dir: RunDirArg, diff_id: Annotated[str, typer.Argument(metavar="DIFF", help="The diff id.",
                                                                    show_default=False)],
        as_json: Json = False) -> None:
    """Why a diff went its way: its ops, the evidence and the numbers of every decision on it."""
    target = RunDir(run_dir)
    with target.store() as store:
        info = store.why(diff_id)
    if as_json:
        emit_json(info)
    else:
        _print_why(info)



@guarded
def frontier(run_dir: RunDirArg, artifact: ArtifactOpt = None, as_json: Json = False) -> None:
    """The examples only changes the run did not commit won, and those changes (the most rows won first): what
    more validation tasks like them, or a longer run, could still decide. `agentgrad why` tells each change's
    story."""
    from agentgrad.runtime.frontier import stored_frontier  # the judge's constants import scipy

    target = RunDir(run_dir)
    with target.store() as store:
        chosen = pick_artifact(store, artifact)
        found = stored_frontier(store, chosen)
    if as_json:
        emit_json({"artifact": chosen, "frontier": [e.to_dict() for e in found]})
        return
    if not found:
        say(f"{chosen}: no example that only a change not committed won")
        return
    say("\n".join([f"{chosen}: {len(found)} example(s) won only by changes not committed "
                    "(one row won is one observation, not proof)"] + [f"  {e.describe()}" for e in found]))

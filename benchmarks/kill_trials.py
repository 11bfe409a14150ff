"""Kill -9 trials: SIGKILL a real `evolve` subprocess at random moments, resume it, and count what went wrong.

Each trial runs `evolve` on a small reference world (sync or async, alternating) in its own run directory, kills
the process K times at seeded random moments, uniform over a clean run's measured duration (so kills land in the
loop, in the held-out scoring and in the git mirror sync at close), then lets a last session finish. The run
directory must then keep every invariant: versions contiguous from 0; every committed diff once; the store's
accepted decisions, the log's accepted verdicts and its commit events naming exactly the committed versions; no
budget overshoot; every step logged once, in order, with one `step_done`; a replay of the log identical; the git
mirror caught up and `git fsck --strict` clean. Writes benchmarks/out/kill_trials.json.

Usage: ``python benchmarks/kill_trials.py [--trials 60] [--jobs 2] [--kills 3] [--seed 0] [--keep]``. Failing
trials keep their run directory (and each session's stderr) under the printed work directory. The script is its
own child (``--child STORE MODE SEED``: one session; prints ``ready``, then a JSON line).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from agentgrad.core.decision import Outcome
from agentgrad.runtime.accounts import NEVER_STARTED
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.evolve import _aggregator, evolve
from agentgrad.runtime.resume import replay
from agentgrad.store.events import Event, EventLog
from agentgrad.store.sqlite import SQLiteStore
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.world import ReferenceWorld, WorldConfig

OUT = Path(__file__).parent / "out" / "kill_trials.json"
WORLD = WorldConfig(n_categories=4, tasks_per_category=40)
BUDGET = Budget(rollouts=48, proposals=24, gate_evals=360)
MEDIAN, SIGMA, WORKERS = 0.004, 1.0, 4
COUNTED = ("rollouts", "proposals", "gate_evals")
MODES = ("sync", "async")
SPAN = 1.1  # kill moments are uniform over [0, SPAN × the slowest clean run's duration]
TIMEOUT = 300.0  # seconds a session may take before it counts as hung
TAIL = 2000  # characters of stderr kept for a failure


def child(store: str, mode: str, seed: int) -> int:
    """One session of the run in `store`: print ``ready``, run (or resume) `evolve`, print a JSON line."""
    world = ReferenceWorld(WORLD)
    agent = WorldAgent(world, median=MEDIAN, sigma=SIGMA)
    print("ready", flush=True)
    result = evolve(agent.splits(), agent.reward, agent=agent, strategy=world.strategy, artifact=world.artifact,
                    budget=BUDGET, workers=WORKERS, asynchronous=mode == "async", store=store, seed=seed)
    print(json.dumps({"ok": result.ok, "error": None if result.error is None else str(result.error),
                      "versions": len(result.history) - 1}), flush=True)
    return 0 if result.ok else 1


@dataclass(frozen=True)
class Session:
    """How one child process ended.

    `sent`: SIGKILL was sent while it ran; `landed`: it died of it. `phase`: where a landed kill hit, read from
    what the session logged (startup, loop, held_out, git_sync, closing). `duration`: seconds from ``ready`` to exit.
    """

    sent: bool
    landed: bool
    returncode: int
    ok: bool
    timed_out: bool
    duration: float
    phase: str
    err: Path


def _read(store: Path, kinds: list[str] | None = None, after: int = 0) -> list[Event]:
    """The run directory's events (of `kinds`, after seq `after`), in order; none if it has no database yet."""
    if not (store / "agentgrad.db").exists():
        return []
    log = EventLog(store)
    try:
        return log.read(kinds, after=after)
    finally:
        log.close()


def _git_lag(store: Path) -> int:
    """How many versions the mirror is behind, read without opening (or repairing) the mirror."""
    with SQLiteStore(store, git=False) as lib:
        return lib.git_lag()


def _phase(store: Path, before: int) -> str:
    """Where a killed session died, from the events it logged after seq `before`."""
    new = _read(store, after=before)
    if any(e.kind == "finished" for e in new):
        return "git_sync" if _git_lag(store) else "closing"
    if any(e.kind == "dispatch" and e.payload.get("kind") == "test_evals" for e in new):
        return "held_out"
    return "loop" if new else "startup"


def _kill_after(proc: subprocess.Popen[str], delay: float) -> bool:
    """SIGKILL `proc` after `delay` seconds unless it exits first; whether the signal was sent."""
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        return True


def _printed_ok(out: str) -> bool:
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return bool(lines) and json.loads(lines[-1]).get("ok") is True


def run_session(store: Path, mode: str, seed: int, delay: float | None, err: Path) -> Session:
    """Run one session on `store`; with `delay`, SIGKILL it that many seconds after it printed ``ready``."""
    before = max((e.seq for e in _read(store)), default=0)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(store), mode, str(seed)]
    with err.open("w") as sink:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=sink, text=True)
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip() == "ready"
        start = time.monotonic()
        sent = ready and delay is not None and _kill_after(proc, delay)
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            timed_out = True
    duration = time.monotonic() - start
    landed = sent and not timed_out and proc.returncode == -signal.SIGKILL
    return Session(sent, landed, proc.returncode, _printed_ok(out), timed_out, duration,
                   _phase(store, before) if landed else "", err)


def session_failure(number: int, session: Session, final: bool) -> str | None:
    """Why a session that was not killed (or the final one) went wrong, with its stderr tail; None if it did not."""
    if session.landed:
        return None
    tail = session.err.read_text(errors="replace")[-TAIL:]
    if session.timed_out:
        return f"session {number} hung for {TIMEOUT:.0f} s: {tail}"
    if session.returncode != 0 or not session.ok:
        what = "the final session" if final else f"session {number} (not killed)"
        return f"{what} exited {session.returncode}, ok={session.ok}: {tail}"
    return None


@dataclass(frozen=True)
class Checks:
    """What the invariants found in one run directory after its final session."""

    commits: int = 0
    lost: int = 0
    duplicated: int = 0
    replay_mismatches: int = 0
    budget_overshoots: int = 0
    git_lag: int = 0
    fsck_failures: int = 0
    failures: tuple[str, ...] = ()


def _extras(items: Sequence[object]) -> int:
    return len(items) - len(set(items))


def check_commits(store: Path, artifact_id: str) -> Checks:
    """Versions contiguous from 0, each committed diff once, and the store's accepted decisions, the log's accepted
    verdicts and its commit events naming exactly the committed versions."""
    with SQLiteStore(store, git=False) as lib:
        history = lib.history(artifact_id)
        accepted = [d.diff_id for d in lib.decisions(outcome=Outcome.ACCEPTED)]
    verdicts = [str(e.payload["diff_id"]) for e in _read(store, ["decision"])
                if e.payload["outcome"] == Outcome.ACCEPTED.value]
    logged = [(int(e.payload["version"]), str(e.payload["diff"])) for e in _read(store, ["commit"])]
    pairs = [(v.number, str(v.diff_id)) for v in history[1:]]
    committed = [diff for _, diff in pairs]
    failures = []
    if [v.number for v in history] != list(range(len(history))) or any(v.diff_id is None for v in history[1:]):
        failures.append(f"versions not contiguous from 0 or without a diff: {[(v.number, v.diff_id) for v in history]}")
    duplicated = sum(_extras(items) for items in (committed, accepted, verdicts, logged))
    if duplicated:
        failures.append(f"duplicated: history {committed}, accepted {accepted}, verdicts {verdicts}, logged {logged}")
    lost_diffs = (set(accepted) | set(verdicts) | {diff for _, diff in logged}) - set(committed)
    unlogged = set(pairs) - set(logged)
    if lost_diffs or unlogged:
        failures.append(f"lost: accepted or logged without a version {sorted(lost_diffs)}, "
                        f"versions without a commit event {sorted(unlogged)}")
    unaccepted = (set(committed) - set(accepted)) | (set(committed) - set(verdicts)) | (set(logged) - set(pairs))
    if unaccepted:
        failures.append(f"versions without an accepted decision or verdict, or logged at another number: "
                        f"{sorted(map(str, unaccepted))}")
    return Checks(commits=len(committed), lost=len(lost_diffs) + len(unlogged), duplicated=duplicated,
                  failures=tuple(failures))


def check_budget_and_steps(store: Path) -> Checks:
    """Calls dispatched per kind within the budget (a call cancelled before it started gave its reservation back,
    and is not counted); steps logged once each, in order, each with one step_done."""
    calls = _read(store, ["dispatch", "done"])
    never = {e.payload["call"] for e in calls if e.kind == "done" and e.payload.get("error") == NEVER_STARTED}
    dispatched = Counter(str(e.payload["kind"]) for e in calls
                         if e.kind == "dispatch" and e.payload["call"] not in never)
    over = [f"{kind}: {dispatched[kind]} > {BUDGET.limit(kind):.0f}" for kind in COUNTED
            if dispatched[kind] > BUDGET.limit(kind)]
    failures = [f"budget overshoot {item}" for item in over]
    steps = [int(e.payload["step"]) for e in _read(store, ["step"])]
    if steps != list(range(len(steps))):
        failures.append(f"steps logged out of order or twice: {steps}")
    done = [int(e.payload["step"]) for e in _read(store, ["step_done"])]
    if done != steps:
        failures.append(f"step_done events {done} do not match the steps {steps}")
    return Checks(budget_overshoots=len(over), failures=tuple(failures))


def check_replay(store: Path, world: ReferenceWorld) -> Checks:
    """Replay every logged step through a fresh default aggregator; every verdict must match the log."""
    log, lib = EventLog(store), SQLiteStore(store, git=False)
    try:
        report = replay(log, lib, _aggregator(RunConfig(), world.strategy), world.artifact)
    finally:
        log.close()
        lib.close()
    return Checks(replay_mismatches=len(report.mismatches), failures=report.mismatches)


def _git(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "--git-dir", str(store / "library.git"), *args], capture_output=True, text=True,
                          check=False)


def check_git(store: Path, versions: int) -> Checks:
    """The mirror caught up (lag 0, read before anything syncs it), opens cleanly, passes `git fsck --strict`, and
    its `dev` branch holds one commit per version (when git is installed)."""
    lag = _git_lag(store)
    if lag:
        return Checks(git_lag=lag, failures=(f"git mirror {lag} versions behind after the final session",))
    with SQLiteStore(store) as lib:
        lag = lib.git_lag()
    failures = [f"git mirror {lag} versions behind once opened"] if lag else []
    fsck_failures = 0
    if shutil.which("git") is not None:
        fsck = _git(store, "fsck", "--strict")
        if fsck.returncode != 0:
            fsck_failures = 1
            failures.append(f"git fsck --strict exited {fsck.returncode}: {(fsck.stdout + fsck.stderr)[-TAIL:]}")
        count = _git(store, "rev-list", "--count", "dev")
        if count.returncode != 0 or count.stdout.strip() != str(versions):
            failures.append(f"dev holds {count.stdout.strip() or count.stderr.strip()} commits, expected {versions}")
    return Checks(git_lag=lag, fsck_failures=fsck_failures, failures=tuple(failures))


def check_run(store: Path) -> Checks:
    """Every invariant of a run directory, summed over the checks."""
    world = ReferenceWorld(WORLD)
    commits = check_commits(store, world.artifact.id)
    parts = [commits, check_budget_and_steps(store), check_replay(store, world), check_git(store, commits.commits + 1)]
    totals = {f.name: sum(getattr(p, f.name) for p in parts) for f in fields(Checks) if f.name != "failures"}
    return Checks(**totals, failures=tuple(f for p in parts for f in p.failures))


@dataclass(frozen=True)
class Trial:
    """One trial: its number, mode, run seed, kill seed and directory (the store is ``directory/store``)."""

    index: int
    mode: str
    seed: int
    kill_seed: str
    directory: Path


def run_trial(trial: Trial, kills: int, span: float) -> dict[str, Any]:
    """Kill `kills` sessions at moments uniform over [0, span] seconds after ``ready``, finish, check; a report."""
    rng = random.Random(trial.kill_seed)
    store = trial.directory / "store"
    trial.directory.mkdir(parents=True, exist_ok=True)
    sessions = [run_session(store, trial.mode, trial.seed, rng.uniform(0.0, span), trial.directory / f"s{n}.err")
                for n in range(kills)]
    sessions.append(run_session(store, trial.mode, trial.seed, None, trial.directory / f"s{kills}.err"))
    failures = [f for n, s in enumerate(sessions) if (f := session_failure(n, s, n == kills)) is not None]
    checks = check_run(store) if (store / "agentgrad.db").exists() else Checks(failures=("no run directory",))
    checks_dict = asdict(checks)
    checks_dict["failures"] = [*failures, *checks.failures]
    return {"index": trial.index, "mode": trial.mode, "seed": trial.seed, "directory": str(trial.directory),
            "sessions": len(sessions), "kills_sent": sum(s.sent for s in sessions),
            "kills_landed": sum(s.landed for s in sessions),
            "phases": [s.phase for s in sessions if s.landed], **checks_dict}


def calibrate(work: Path, jobs: int, seed: int) -> dict[str, Any]:
    """Clean runs of each mode, `jobs` at once (the trials' load): their ready-to-exit durations and kill span."""
    specs = [(mode, n) for mode in MODES for n in range(jobs)]

    def one(spec: tuple[str, int]) -> Session:
        directory = work / f"calibrate-{spec[0]}-{spec[1]}"
        directory.mkdir(parents=True)
        return run_session(directory / "store", spec[0], seed + spec[1], None, directory / "s0.err")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        sessions = list(pool.map(one, specs))
    bad = [f for s in sessions if (f := session_failure(0, s, True)) is not None]
    if bad:
        raise RuntimeError(f"a clean calibration run failed (kept under {work}): {bad[0]}")
    result = {}
    for mode in MODES:
        durations = [s.duration for (m, _), s in zip(specs, sessions, strict=True) if m == mode]
        result[mode] = {"durations": [round(d, 3) for d in durations], "span": round(SPAN * max(durations), 3)}
    for spec in specs:
        shutil.rmtree(work / f"calibrate-{spec[0]}-{spec[1]}")
    return result


def _mode_totals(reports: list[dict[str, Any]], mode: str) -> dict[str, int]:
    rows = [r for r in reports if r["mode"] == mode]
    keys = ("sessions", "kills_landed", "commits", "lost", "duplicated", "replay_mismatches", "budget_overshoots")
    return {"trials": len(rows), **{k: sum(int(r[k]) for r in rows) for k in keys},
            "failed_trials": sum(1 for r in rows if r["failures"])}


def summarise(reports: list[dict[str, Any]], calibration: dict[str, Any], args: argparse.Namespace,
              wall: float, work: Path) -> dict[str, Any]:
    """The figures written to kill_trials.json."""
    total = {k: sum(int(r[k]) for r in reports) for k in ("sessions", "kills_sent", "kills_landed", "commits", "lost",
                                                          "duplicated", "replay_mismatches", "budget_overshoots",
                                                          "git_lag", "fsck_failures")}
    failed = [{k: r[k] for k in ("index", "mode", "seed", "directory", "failures")} for r in reports if r["failures"]]
    return {"config": {"trials": args.trials, "jobs": args.jobs, "kills_per_trial": args.kills, "seed": args.seed,
                       "budget": BUDGET.to_dict(), "world": WORLD.to_dict(), "median_latency": MEDIAN,
                       "sigma": SIGMA, "workers": WORKERS},
            "calibration": calibration, "trials": len(reports), **total,
            "kill_phases": dict(Counter(p for r in reports for p in r["phases"])),
            "modes": {mode: _mode_totals(reports, mode) for mode in MODES},
            "failed_trials": failed, "kept": str(work) if failed or args.keep else None,
            "wall_time": round(wall, 1),
            "per_trial": [{k: r[k] for k in ("index", "mode", "seed", "kills_landed", "commits", "phases")}
                          for r in reports]}


def sentence(s: dict[str, Any]) -> str:
    """The one-paragraph summary printed at the end."""
    verdict = ("every invariant held" if not s["failed_trials"]
               else f"{len(s['failed_trials'])} trials FAILED (kept under {s['kept']})")
    return (f"{s['trials']} kill -9 trials ({s['modes']['sync']['trials']} sync, {s['modes']['async']['trials']} "
            f"async) in {s['wall_time']} s: {s['kills_landed']} of {s['kills_sent']} SIGKILLs landed mid-run "
            f"(phases {s['kill_phases']}) over {s['sessions']} sessions; {s['commits']} commits, {s['lost']} lost, "
            f"{s['duplicated']} duplicated, {s['replay_mismatches']} replay mismatches, {s['budget_overshoots']} "
            f"budget overshoots, git lag {s['git_lag']}, {s['fsck_failures']} fsck failures; {verdict}.")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--child", nargs=3, metavar=("STORE", "MODE", "SEED"), help="run one session (internal)")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2, help="trials run at once")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs per trial before the final session")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep every run directory, not only failing ones")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], args.child[1], int(args.child[2]))
    return bench(args)


def bench(args: argparse.Namespace) -> int:
    """Calibrate, run the trials, write the JSON, print the summary; 1 if any trial failed."""
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="kill_trials_"))
    calibration = calibrate(work, args.jobs, args.seed + 10_000)
    trials = [Trial(i, MODES[i % 2], args.seed + i, f"kill/{args.seed}/{i}", work / f"trial{i:03d}")
              for i in range(args.trials)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        reports = list(pool.map(lambda t: run_trial(t, args.kills, calibration[t.mode]["span"]), trials))
    for report in reports:
        if not report["failures"] and not args.keep:
            shutil.rmtree(report["directory"])
    summary = summarise(reports, calibration, args, time.monotonic() - start, work)
    if summary["kept"] is None:
        shutil.rmtree(work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(sentence(summary))
    return 1 if summary["failed_trials"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Service benchmarks (issue 13). Writes benchmarks/out/service_bench.json.

- read throughput: requests per second of each read endpoint over 10 runs of 10k decisions each (stores built
  synthetically through the store API), 8 client threads against `agentgrad serve`'s app in its own process;
- SSE fan-out: 50 clients follow one live run while a writer appends events; each client drops its connection
  once, part way, and reconnects with ``Last-Event-ID``; every client must end with every event exactly once;
- commit to client: the time from a commit's transaction (store write and its commit event together) to the
  moment an SSE client has it, over a series of commits;
- commit to browser: the same, to the moment the verdict's row appears on the dashboard's live run page in
  headless Chromium (a MutationObserver notes it; the browser and the writer read the same system clock).

`--quick` uses 2 runs of 2k decisions and 10 clients.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agentgrad.core.artifact import Artifact, Kind
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.service.jobs import JobState, JobTable
from agentgrad.store.sqlite import SQLiteStore

OUT = Path(__file__).parent / "out"
ARTIFACT = "skills/bench"
EVIDENCE = Evidence.paired({"t1": 0.0, "t2": 0.5, "t3": 1.0}, {"t1": 1.0, "t2": 0.5, "t3": 1.0})


def _item(number: int, base: int, outcome: Outcome) -> tuple[Diff, Decision]:
    diff = Diff(ARTIFACT, base, (Op.add("rule", f"- rule {number}: use method {number % 7}"),), author="bench",
                rationale=f"synthetic proposal {number}")
    return diff, Decision(diff.id, ARTIFACT, outcome, "gate", f"synthetic verdict {number}", {"p": 0.5, "n": 3.0})


def build_run(run_dir: Path, decisions: int, commits: int) -> None:
    """A run directory with `decisions` verdicts (`commits` of them accepted and committed) and their events."""
    every = max(1, decisions // max(1, commits))
    with SQLiteStore(run_dir, git=False) as store:
        store.add_artifact(Artifact(ARTIFACT, Kind.SKILL, "# Bench skill\n"))
        with store.transaction():
            base, events = 0, []
            for number in range(decisions):
                accept = number % every == 0 and base < commits
                diff, decision = _item(number, base, Outcome.ACCEPTED if accept else Outcome.REJECTED)
                if accept:
                    store.commit(diff, EVIDENCE, decision)
                    base += 1
                    events.append(("commit", {"artifact": ARTIFACT, "version": base, "diff": diff.id}))
                else:
                    store.record(diff, EVIDENCE, decision)
                events.append(("decision", decision.to_dict()))
            store.journal.append_many(events)


def build_home(home: Path, runs: int, decisions: int, state: JobState = JobState.FINISHED, first: int = 0
               ) -> list[str]:
    """A service home with `runs` jobs, each over a synthetic run; their ids."""
    jobs = JobTable(home / "service.db", home / "runs")
    ids = []
    try:
        for index in range(first, first + runs):
            job_id = f"r{index:012x}"
            jobs.create(job_id, f"bench-{index}", "local", limit=first + runs + 1)
            build_run(home / "runs" / job_id, decisions, commits=50)
            jobs.update(job_id, state=state)
            ids.append(job_id)
    finally:
        jobs.close()
    return ids


def serve_process(home: Path, port: int) -> subprocess.Popen[bytes]:
    """The service app (local-only, no supervisor: the benchmark plays the workers) in its own process."""
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(home), str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/runs", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the service did not start")


def _serve(home: Path, port: int) -> None:
    import uvicorn

    from agentgrad.service.app import build_service, create_app
    from agentgrad.service.auth import TokenBook
    from agentgrad.service.settings import Settings

    service = build_service(Settings(home=home, local_only=True), TokenBook([], default_max_jobs=4))
    uvicorn.run(create_app(service, supervise=False), host="127.0.0.1", port=port, log_level="warning")


def _rate(url: str, paths: list[str], seconds: float, threads: int) -> dict[str, float]:
    counts, errors = [0] * threads, [0] * threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    stop = time.monotonic() + seconds

    def work(slot: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            index = slot
            while time.monotonic() < stop:
                began = time.perf_counter()
                ok = client.get(paths[index % len(paths)]).status_code == 200
                latencies[slot].append(time.perf_counter() - began)
                counts[slot] += ok
                errors[slot] += not ok
                index += threads

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    every = sorted(x for slot in latencies for x in slot)
    return {"rps": round(sum(counts) / seconds, 1), "errors": sum(errors),
            "p50_ms": round(1000 * every[len(every) // 2], 1), "p95_ms": round(1000 * every[int(len(every) * .95)], 1)}


def read_throughput(url: str, ids: list[str], seconds: float) -> dict[str, Any]:
    with httpx.Client(base_url=url) as client:
        diff = client.get(f"/api/runs/{ids[0]}/diffs", params={"limit": 1, "offset": 5}).json()["items"][0]["id"]
    endpoints: dict[str, Callable[[str], str]] = {
        "list runs": lambda j: "/api/runs?limit=50",
        "run status": lambda j: f"/api/runs/{j}",
        "artifacts": lambda j: f"/api/runs/{j}/artifacts",
        "versions": lambda j: f"/api/runs/{j}/versions?artifact={ARTIFACT}&limit=50",
        "decisions page": lambda j: f"/api/runs/{j}/decisions?limit=50&offset=5000",
        "decisions accepted": lambda j: f"/api/runs/{j}/decisions?outcome=accepted&limit=50",
        "diffs page": lambda j: f"/api/runs/{j}/diffs?limit=50&offset=100",
        "diff rendered": lambda j: f"/api/runs/{j}/diffs/{diff}",
        "why": lambda j: f"/api/runs/{j}/why/{diff}",
        "usage": lambda j: f"/api/runs/{j}/usage",
        "rewards": lambda j: f"/api/runs/{j}/rewards",
        "export": lambda j: f"/api/runs/{j}/export",
    }
    # the diff exists in the first run only: its endpoints stay on that run
    return {name: _rate(url, [path(j) for j in (ids if "diff " not in name and name != "why" else ids[:1])],
                        seconds, threads=8) for name, path in endpoints.items()}


class Follower(threading.Thread):
    """An SSE client that drops its connection once, after `drop_after` events, and resumes with Last-Event-ID."""

    def __init__(self, url: str, drop_after: int, watch: str | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.drop_after, self.watch = url, drop_after, watch
        self.seqs: list[int] = []
        self.arrivals: dict[int, float] = {}
        self.reconnects = 0

    def _follow(self, client: httpx.Client, headers: dict[str, str], limit: int | None) -> bool:
        """Read until `limit` events (True: dropped on purpose) or the `end` event (False)."""
        with client.stream("GET", self.url, headers=headers) as response:
            count, kind, seq = 0, "", 0
            for line in response.iter_lines():
                if line.startswith("id:"):
                    seq = int(line[3:])
                elif line.startswith("event:"):
                    kind = line[6:].strip()
                    if kind == "end":
                        return False
                elif line.startswith("data:"):
                    self.seqs.append(seq)
                    if kind == self.watch:
                        self.arrivals[seq] = time.time()
                    count += 1
                    if limit is not None and count >= limit:
                        return True
        return False

    def run(self) -> None:
        with httpx.Client(timeout=60) as client:
            if self._follow(client, {}, self.drop_after):
                self.reconnects += 1
                self._follow(client, {"Last-Event-ID": str(self.seqs[-1])}, None)


def _job_done(home: Path, job_id: str) -> None:
    jobs = JobTable(home / "service.db", home / "runs")
    try:
        jobs.update(job_id, state=JobState.FINISHED)
    finally:
        jobs.close()


def fan_out(url: str, home: Path, job_id: str, clients: int, events: int) -> dict[str, Any]:
    run_dir = home / "runs" / job_id
    followers = [Follower(f"{url}/api/runs/{job_id}/events", drop_after=1 + (i * 37) % (events // 2))
                 for i in range(clients)]
    for follower in followers:
        follower.start()
    with SQLiteStore(run_dir, git=False) as store:
        start, began = store.journal.last_seq(), time.perf_counter()
        for batch in range(events // 20):
            store.journal.append_many([("rollout", {"task": f"t{batch}-{i}", "reward": 1.0}) for i in range(20)])
            time.sleep(0.005)
        written = time.perf_counter() - began
        expected = list(range(1, store.journal.last_seq() + 1))
    _job_done(home, job_id)
    for follower in followers:
        follower.join(timeout=120)
    exact = sum(1 for f in followers if f.seqs == expected)
    dups = sum(len(f.seqs) - len(set(f.seqs)) for f in followers)
    lost = sum(len(set(expected) - set(f.seqs)) for f in followers)
    return {"clients": clients, "events": len(expected), "live_events": len(expected) - start,
            "write_seconds": round(written, 2), "clients_exact": exact, "duplicates": dups, "lost": lost,
            "reconnects": sum(f.reconnects for f in followers), "ok": exact == clients}


def commit_latency(url: str, home: Path, job_id: str, commits: int) -> dict[str, Any]:
    follower = Follower(f"{url}/api/runs/{job_id}/events?kind=commit", drop_after=10**9, watch="commit")
    follower.start()
    time.sleep(1.0)
    committed = _commit_series(home, job_id, commits)
    run_dir = home / "runs" / job_id
    time.sleep(0.5)
    _job_done(home, job_id)
    follower.join(timeout=30)
    delays = sorted(1000 * (follower.arrivals[s] - t) for s, t in committed.items() if s in follower.arrivals)
    assert run_dir.exists()
    return {"commits": commits, "received": len(delays), "median_ms": round(statistics.median(delays), 1),
            "p95_ms": round(delays[int(len(delays) * 0.95) - 1], 1), "max_ms": round(delays[-1], 1),
            "stream_poll_ms": 100}


CHROMIUM = Path("/usr/bin/chromium")
OBSERVE = """() => { window.seen = {}; new MutationObserver((changes) => { for (const c of changes) for (const n of
c.addedNodes) if (n.dataset && n.dataset.seq) window.seen[n.dataset.seq] = Date.now() / 1000; })
.observe(document.getElementById("decisions"), { childList: true }); }"""


def browser_latency(url: str, home: Path, job_id: str, commits: int) -> dict[str, Any]:
    """From a commit (and its verdict) in the run's store to its row on the dashboard's live run page, in headless
    Chromium (Debian's, as the browser tests use); skipped with the reason when there is no browser."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "playwright is not installed (the dev extra has it)"}
    if not CHROMIUM.exists():
        return {"skipped": f"no Chromium at {CHROMIUM}: scripts/install-browser.sh installs it"}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page()
            page.goto(f"{url}/runs/{job_id}")
            page.wait_for_selector("#decisions", state="attached")
            page.evaluate(OBSERVE)
            time.sleep(1.0)
            written = _commit_series(home, job_id, commits, decision=True)
            time.sleep(1.0)
            seen: dict[str, float] = page.evaluate("() => window.seen")
        finally:
            browser.close()
    _job_done(home, job_id)
    delays = sorted(1000 * (seen[str(s)] - t) for s, t in written.items() if str(s) in seen)
    return {"commits": commits, "shown": len(delays), "median_ms": round(statistics.median(delays), 1),
            "p95_ms": round(delays[int(len(delays) * 0.95) - 1], 1), "max_ms": round(delays[-1], 1)}


def _commit_series(home: Path, job_id: str, commits: int, *, decision: bool = False) -> dict[int, float]:
    """Commit `commits` versions 50 ms apart, each with its commit event (and, with `decision`, its verdict's event
    first): the wall time each event was written, by its sequence number (the verdict's when logged)."""
    written: dict[int, float] = {}
    with SQLiteStore(home / "runs" / job_id, git=False) as store:
        base = store.head(ARTIFACT).number
        for number in range(commits):
            diff, verdict = _item(10**6 + (10**5 if decision else 0) + number, base, Outcome.ACCEPTED)
            with store.transaction():
                version = store.commit(diff, EVIDENCE, verdict)
                seq = store.journal.append("decision", verdict.to_dict()) if decision else None
                last = store.journal.append("commit", {"artifact": ARTIFACT, "version": version.number,
                                                       "diff": diff.id})
            written[last if seq is None else seq] = time.time()
            base = version.number
            time.sleep(0.05)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", nargs=2, metavar=("HOME", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(Path(args.serve[0]), int(args.serve[1]))
        return
    runs, decisions, clients = (2, 2_000, 10) if args.quick else (10, 10_000, 50)
    port = 18000 + int(time.time()) % 1000
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        began = time.perf_counter()
        ids = build_home(home, runs, decisions)
        live = build_home(home, 1, 0, JobState.RUNNING, first=runs)
        build_seconds = time.perf_counter() - began
        server = serve_process(home, port)
        try:
            url = f"http://127.0.0.1:{port}"
            results: dict[str, Any] = {
                "setup": {"runs": runs, "decisions_per_run": decisions, "build_seconds": round(build_seconds, 1)},
                "read_throughput": read_throughput(url, ids, 2.0 if args.quick else 4.0),
                "sse_fan_out": fan_out(url, home, live[0], clients, 1000 if args.quick else 4000)}
            _reopen(home, live[0])
            results["commit_to_client"] = commit_latency(url, home, live[0], 20 if args.quick else 50)
            _reopen(home, live[0])
            results["commit_to_browser"] = browser_latency(url, home, live[0], 20 if args.quick else 50)
        finally:
            server.terminate()
            server.wait(timeout=20)
    OUT.mkdir(exist_ok=True)
    (OUT / "service_bench.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


def _reopen(home: Path, job_id: str) -> None:
    jobs = JobTable(home / "service.db", home / "runs")
    try:
        jobs.update(job_id, state=JobState.RUNNING)
    finally:
        jobs.close()


if __name__ == "__main__":
    main()

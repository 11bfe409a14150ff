"""Every read and library command on a finished run, checked against the store and the event log."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from agentgrad.core.decision import Outcome
from agentgrad.runtime.frontier import frontier
from agentgrad.store.sqlite import SQLiteStore
from tests.cli.helpers import ARTIFACT, check_consistent, cli, cli_process, dispatched, events, json_lines, world_config
from tests.service.support import NEAR_MISS, add_near_miss


def test_run_finishes_with_a_summary_and_a_consistent_store(finished_run: Path) -> None:
    committed = check_consistent(finished_run)
    assert committed, "the small world should accept at least one right rule"
    assert not (finished_run / "run.pid").exists()
    assert dispatched(finished_run, "rollouts") <= 48 and dispatched(finished_run, "gate_evals") <= 400


def test_run_refuses_a_directory_that_holds_a_run(finished_run: Path, tmp_path: Path) -> None:
    result = cli("run", world_config(tmp_path), "--run-dir", finished_run)
    assert result.exit_code == 2
    assert f"agentgrad resume {finished_run}" in result.stderr


def test_status_reports_budget_verdicts_and_heads_from_the_run(finished_run: Path) -> None:
    result = cli("status", finished_run, "--json")
    assert result.exit_code == 0
    info = json.loads(result.stdout)
    with SQLiteStore(finished_run, git=False) as store:
        dev = store.head(ARTIFACT).number
        latest = {d.diff_id: d.outcome.value for d in store.decisions()}
    assert info["state"] == "finished" and info["pid"] is None
    assert info["artifacts"] == {ARTIFACT: {"dev": dev, "stable": 0}}
    assert info["budget"]["rollouts"] == {"used": dispatched(finished_run, "rollouts"), "limit": 48}
    assert info["verdicts"]["accepted"] == dev == info["commits"]
    assert sum(info["verdicts"].values()) == sum(1 for v in latest.values() if v not in ("recheck", "deferred"))
    finished = [p for k, p in events(finished_run, ["finished"])][-1]
    assert info["held_out"] == {"baseline": finished["baseline"], "learned": finished["test_reward"]}
    text = cli("status", finished_run).stdout
    assert "finished" in text and f"dev v{dev}" in text
    assert f"rollouts {dispatched(finished_run, 'rollouts')}/48" in text


def test_log_lists_decisions_and_filters_by_outcome_and_artifact(finished_run: Path) -> None:
    everything = json_lines(cli("log", finished_run, "--json").stdout)
    with SQLiteStore(finished_run, git=False) as store:
        assert everything == [d.to_dict() for d in store.decisions()]
    accepted = json_lines(cli("log", finished_run, "--outcome", "accepted", "--json").stdout)
    assert accepted and [d for d in everything if d["outcome"] == "accepted"] == accepted
    assert cli("log", finished_run, "--artifact", ARTIFACT, "--json").stdout == cli("log", finished_run,
                                                                                      "--json").stdout
    text = cli("log", finished_run, "-o", "accepted").stdout.splitlines()
    assert len(text) == len(accepted) and all(" accepted " in line for line in text)


def test_log_rejects_an_unknown_outcome_or_artifact(finished_run: Path) -> None:
    assert cli("log", finished_run, "--outcome", "great").exit_code == 2
    result = cli("log", finished_run, "--artifact", "skills/other")
    assert result.exit_code == 1 and "no artifact 'skills/other'" in result.stderr


def test_show_prints_dev_stable_and_any_version(finished_run: Path) -> None:
    with SQLiteStore(finished_run, git=False) as store:
        history = store.history(ARTIFACT)
    assert cli("show", finished_run).stdout == history[-1].text
    assert cli("show", finished_run, ARTIFACT, "--stable").stdout == history[0].text
    assert cli("show", finished_run, "--version", "1").stdout == history[1].text
    missing = cli("show", finished_run, "--version", str(len(history) + 5))
    assert missing.exit_code == 1 and missing.stderr.startswith("error:")
    assert cli("show", finished_run, "--version", "1", "--stable").exit_code == 2


def test_diff_is_the_unified_diff_of_the_stored_texts(finished_run: Path) -> None:
    with SQLiteStore(finished_run, git=False) as store:
        history = store.history(ARTIFACT)
    out = cli("diff", finished_run, "0", "dev").stdout
    added = [line[1:] for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == history[-1].text.splitlines()[1:]  # every rule added after the heading
    assert out.splitlines()[0] == f"--- {ARTIFACT}@v0"
    assert "are the same" in cli("diff", finished_run, "1", "v1").stdout
    assert cli("diff", finished_run, "0", "latest").exit_code == 2


def test_frontier_lists_the_examples_only_changes_not_committed_won(finished_run: Path) -> None:
    near = add_near_miss(finished_run, ARTIFACT)
    with SQLiteStore(finished_run, git=False) as store:
        expected = frontier(store.decisions(artifact_id=ARTIFACT), store.evidence)
        last = {d.diff_id: d.outcome for d in store.decisions()}
    assert {e.task_id for e in expected if e.diff_ids == (near,)} == set(NEAR_MISS)
    info = json.loads(cli("frontier", finished_run, "--json").stdout)
    assert info == {"artifact": ARTIFACT, "frontier": [
        {"task_id": e.task_id, "diff_ids": list(e.diff_ids), "wins": e.wins} for e in expected]}
    assert all(last[d] is not Outcome.ACCEPTED for e in expected for d in e.diff_ids)
    text = cli("frontier", finished_run).stdout
    assert f"{len(expected)} example(s) won only by changes not committed" in text
    assert all(e.describe() in text for e in expected)
    assert cli("frontier", finished_run, "--artifact", "nope").exit_code == 1


def test_why_shows_the_evidence_and_numbers_of_an_accepted_diff(finished_run: Path) -> None:
    with SQLiteStore(finished_run, git=False) as store:
        version = store.history(ARTIFACT)[1]
        assert version.diff_id is not None
        expected = store.why(version.diff_id)
    info = json.loads(cli("why", finished_run, version.diff_id, "--json").stdout)
    assert info == json.loads(json.dumps(expected))
    text = cli("why", finished_run, version.diff_id).stdout
    accepted = next(d for d in expected["decisions"] if d["outcome"] == "accepted")
    assert accepted["reason"] in text and "committed as v1" in text
    assert f"{expected['evidence']['tasks']} tasks" in text
    assert f"p={accepted['numbers']['p']:.4g}" in text
    unknown = cli("why", finished_run, "p999999")
    assert unknown.exit_code == 1 and unknown.stderr.startswith("error:")


def test_promote_moves_stable_to_dev_and_export_writes_it(finished_run: Path, tmp_path: Path) -> None:
    with SQLiteStore(finished_run, git=False) as store:
        dev = store.head(ARTIFACT)
    cli("export", finished_run, tmp_path / "before")
    assert (tmp_path / "before" / ARTIFACT).read_text() != dev.text  # stable was still version 0
    promoted = json.loads(cli("promote", finished_run, "--json").stdout)
    assert promoted == {"promoted": {ARTIFACT: dev.number}, "before": {ARTIFACT: 0}}
    with SQLiteStore(finished_run, git=False) as store:
        assert store.head(ARTIFACT, "stable") == dev
    assert "unchanged" in cli("promote", finished_run).stdout
    result = cli("export", finished_run, tmp_path / "after")
    assert result.exit_code == 0
    assert (tmp_path / "after" / ARTIFACT).read_text() == dev.text
    assert cli("export", finished_run, tmp_path / "dev", "--dev").exit_code == 0
    assert (tmp_path / "dev" / ARTIFACT).read_text() == dev.text


def test_resume_of_a_finished_run_does_nothing(finished_run: Path) -> None:
    before = Counter(kind for kind, _ in events(finished_run))
    result = cli("resume", finished_run)
    assert result.exit_code == 0 and "nothing to resume" in result.stdout
    assert Counter(kind for kind, _ in events(finished_run)) == before


def test_cancel_of_a_run_that_is_not_running_says_so(finished_run: Path) -> None:
    result = cli("cancel", finished_run)
    assert result.exit_code == 0 and "not running" in result.stdout


def test_run_on_own_functions_and_a_shipped_set(tmp_path: Path) -> None:
    (tmp_path / "toy_agent.py").write_text(
        "def run(skill, task):\n"
        "    return str(eval(task.input.removeprefix('What is ').rstrip('?').replace('×', '*')))"
        " if 'compute' in skill else 'no idea'\n"
        "def propose(skill, task, output, reward):\n"
        "    return 'compute the expression exactly'\n")
    config = tmp_path / "toy.yaml"
    config.write_text("task: {set: arithmetic}\nmodel: {run: 'toy_agent:run', propose: 'toy_agent:propose'}\n"
                      "budget: {rollouts: 6, gate_evals: 60}\nrun: {workers: 2}\n")
    result = cli("run", config, "--run-dir", tmp_path / "run", "--json")
    assert result.exit_code == 0, result.output
    lines = json_lines(result.stdout)
    assert lines[-1]["event"] == "summary" and lines[-1]["ok"] and lines[-1]["versions"] == 1
    assert lines[-1]["test_reward"] == 1.0 and lines[-1]["baseline_test_reward"] == 0.0
    kinds = [line["event"] for line in lines[:-1]]
    assert kinds[0] == "started" and "held_out" in kinds  # callback-only events, and every logged one but the
    assert [k for k in kinds[1:] if k != "held_out"] == [kind for kind, _ in events(tmp_path / "run")  # per-call
                                                          if kind not in ("dispatch", "done", "rollout")]
    assert cli("show", tmp_path / "run").stdout.strip().endswith("compute the expression exactly")


def test_a_run_that_fails_exits_1_and_status_names_the_error(tmp_path: Path) -> None:
    (tmp_path / "bad_grader.py").write_text(
        "def run(skill, task):\n    return 'x'\n"
        "def propose(skill, task, output, reward):\n    return 'a rule'\n"
        "def score(output, expected):\n    raise ValueError('grader bug')\n")
    config = tmp_path / "bad.toml"
    config.write_text('[task]\nset = "dates"\nscore = "bad_grader:score"\n'
                      '[model]\nrun = "bad_grader:run"\npropose = "bad_grader:propose"\n[budget]\nrollouts = 4\n')
    result = cli("run", config, "--run-dir", tmp_path / "run", "--quiet")
    assert result.exit_code == 1
    assert "FAILED: RewardError" in result.stdout and "grader bug" in result.stdout
    info = json.loads(cli("status", tmp_path / "run", "--json").stdout)
    assert info["state"] == "failed" and "grader bug" in info["error"]


def test_agentgrad_run_exits_within_its_bound_when_a_sync_run_hangs_for_good(tmp_path: Path) -> None:
    (tmp_path / "stuck_agent.py").write_text(
        "import threading\n"
        "NEVER = threading.Event()\n"
        "def run(skill, task):\n"
        "    if task.id.endswith(('1', '5')):\n"
        "        NEVER.wait()  # a request that never comes back\n"
        "    return 'a long time ago'\n"
        "def propose(skill, task, output, reward):\n    return 'Always state the year.'\n")
    config = tmp_path / "stuck.toml"
    config.write_text('[task]\nset = "dates"\n[model]\nrun = "stuck_agent:run"\npropose = "stuck_agent:propose"\n'
                      '[budget]\nrollouts = 8\ngate_evals = 30\n[run]\ntimeout = 1.0\n')
    started = time.monotonic()
    done = cli_process("run", config, "--run-dir", tmp_path / "run", "--quiet", timeout=120)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert time.monotonic() - started < 60  # the hung calls' threads did not keep the process alive

"""The MLflow tracker mirrors a run into MLflow: parameters, totals over time, the final artifact, the outcome."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgrad.core.decision import Outcome
from agentgrad.errors import ConfigError, RewardError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.result import Result
from agentgrad.tracking import MlflowTracker
from agentgrad.tracking.mlflow import RUN_KEY_TAG, flatten, run_key
from tests.runtime.helpers import BUDGET, agent, events, run

SMALL = Budget(rollouts=12, proposals=6, gate_evals=120)


@pytest.fixture
def uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local MLflow file store in tmp_path (MLflow 3 refuses file stores unless this opt-out is set)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    yield (tmp_path / "mlruns").as_uri()


def history(tracker: MlflowTracker, key: str) -> list[tuple[int, float]]:
    assert tracker.run_id is not None
    return [(m.step, m.value) for m in tracker.client.get_metric_history(tracker.run_id, key)]


def final(tracker: MlflowTracker, key: str) -> float:
    assert tracker.run_id is not None
    return float(tracker.client.get_run(tracker.run_id).data.metrics[key])


def started(run_dir: Path, *, resuming: bool = False) -> dict[str, Any]:
    return {"run_dir": str(run_dir), "artifact": "skill", "resuming": resuming,
            "config": {"workers": {"rollout": 2}, "seed": 0}, "budget": {"rollouts": 10, "cost": None},
            "splits": {"train": 3, "val": 2}}


def call(number: int, stage: str = "rollouts", error: str | None = None) -> dict[str, Any]:
    return {"call": number, "stage": stage, "task": f"t{number}", "error": error, "seconds": 0.5, "end": 1.0,
            "tokens": 10.0, "cost": 0.25}


def test_a_run_logs_its_params_a_growing_call_series_its_verdicts_and_the_final_artifact(
        tmp_path: Path, uri: str) -> None:
    with MlflowTracker(tracking_uri=uri, experiment="world", every=20) as tracker:
        result = run(tmp_path / "run", agent(), asynchronous=False, callbacks=[tracker])
    assert result.ok and tracker.run_id is not None and not tracker.active
    data = tracker.client.get_run(tracker.run_id)
    assert data.info.status == "FINISHED"
    assert data.data.params["config.workers.rollout"] == "4"
    assert data.data.params["budget.rollouts"] == str(BUDGET.rollouts)
    assert data.data.params["budget.wall_time"] == "null"
    assert data.data.params["splits.val"] == str(len(agent().splits().val))
    series = history(tracker, "calls/total")
    steps = [step for step, _ in series]
    assert len(series) >= 3 and steps == sorted(set(steps)) and all(step == value for step, value in series)
    used = result.usage
    assert series[-1][1] == used.rollouts + used.proposals + used.gate_evals + used.test_evals
    assert final(tracker, "calls/rollouts") == used.rollouts
    accepted = sum(d.outcome is Outcome.ACCEPTED for d in result.decisions)
    assert accepted > 0 and final(tracker, "decisions/accepted") == accepted
    assert final(tracker, "head/version") == result.history[-1].number
    assert final(tracker, "test/reward") == result.test_reward
    assert final(tracker, "test/baseline") == result.baseline_test_reward
    promotions = [p for _, p in events(tmp_path / "run", ["promotion"])]
    assert promotions and final(tracker, "val/dev") == promotions[-1]["dev_val"]
    assert final(tracker, "promotions/promoted") == sum(p["outcome"] == "promoted" for p in promotions)
    assert 0.0 <= final(tracker, "gate/base_reward") < final(tracker, "gate/candidate_reward") <= 1.0
    path = tracker.client.download_artifacts(tracker.run_id, f"final/{result.artifact.id}.txt", str(tmp_path))
    assert Path(path).read_text(encoding="utf-8") == result.artifact.text != agent().world.artifact.text


def test_metrics_are_sent_in_batches_at_steps_and_every_n_calls_not_per_event(tmp_path: Path, uri: str) -> None:
    tracker = MlflowTracker(tracking_uri=uri, every=1000)
    result = run(tmp_path / "run", agent(), asynchronous=False, callbacks=[tracker])
    points = len(history(tracker, "calls/total"))
    calls = result.usage.rollouts + result.usage.proposals + result.usage.gate_evals
    assert points <= final(tracker, "steps") + 1 < calls


def test_a_resumed_run_directory_continues_its_mlflow_run_and_its_totals(tmp_path: Path, uri: str) -> None:
    first = MlflowTracker(tracking_uri=uri)
    run(tmp_path / "run", agent(), budget=SMALL, asynchronous=False, callbacks=[first])
    before = history(first, "calls/total")
    assert final(first, "decisions/accepted") > 0  # so the second session must carry the total over
    second = MlflowTracker(tracking_uri=uri)  # a new process would make a new tracker
    result = run(tmp_path / "run", agent(), asynchronous=False, callbacks=[second])
    assert second.run_id == first.run_id
    experiment = second.client.get_experiment_by_name("agentgrad")
    assert len(second.client.search_runs([experiment.experiment_id])) == 1
    series = history(second, "calls/total")
    assert series[:len(before)] == before and series[len(before)][0] > before[-1][0]
    assert final(second, "calls/rollouts") == result.usage.rollouts == BUDGET.rollouts
    accepted = sum(d.outcome is Outcome.ACCEPTED for d in result.decisions)
    assert final(second, "decisions/accepted") == accepted == len(result.history) - 1
    data = second.client.get_run(second.run_id)
    assert data.info.status == "FINISHED"
    assert data.data.tags["agentgrad.resumes"] == "1"
    assert data.data.tags["agentgrad.resume1.budget.rollouts"] == str(BUDGET.rollouts)
    assert data.data.params["budget.rollouts"] == str(SMALL.rollouts)  # parameters never change once logged


def test_a_failed_run_ends_its_mlflow_run_failed_with_the_error_and_its_artifact(tmp_path: Path, uri: str) -> None:
    def broken(task: Any, output: str) -> float:
        raise KeyError("grader bug")

    tracker = MlflowTracker(tracking_uri=uri)
    result: Result = run(tmp_path / "run", agent(), asynchronous=False, reward=broken, callbacks=[tracker])
    assert isinstance(result.error, RewardError)
    assert tracker.run_id is not None
    data = tracker.client.get_run(tracker.run_id)
    assert data.info.status == "FAILED"
    assert data.data.tags["agentgrad.error"].startswith("RewardError")
    assert "test/reward" not in data.data.metrics
    names = [f.path for f in tracker.client.list_artifacts(tracker.run_id, "final/skills")]
    assert names == [f"final/{result.artifact.id}.txt"]


def test_closing_an_unfinished_run_sends_its_totals_and_marks_it_killed(tmp_path: Path, uri: str) -> None:
    tracker = MlflowTracker(tracking_uri=uri, every=100)
    tracker("started", started(tmp_path))
    tracker("call", call(0))
    tracker("call", call(1, "proposals", error="ValueError: no"))
    tracker("proposal", {"diff": {"id": "p1"}, "task": "t1"})
    tracker("proposal", {"diff": {"id": "p1"}, "task": "t1", "trimmed": [{"new": "- tip 1: be concise"}]})
    tracker.close()
    assert tracker.run_id is not None and not tracker.active
    data = tracker.client.get_run(tracker.run_id)
    assert data.info.status == "KILLED"
    assert data.data.metrics["proposals/made"] == 1 and data.data.metrics["proposals/trimmed_ops"] == 1
    assert data.data.metrics["calls/total"] == 2 and data.data.metrics["calls/errors"] == 1
    assert data.data.metrics["usage/cost"] == 0.5
    assert data.data.tags[RUN_KEY_TAG] == run_key(tmp_path)
    with pytest.raises(ValueError, match="outside a run"):
        tracker("call", call(2))


def test_with_on_error_warn_a_tracking_failure_is_logged_and_counted_not_raised(
        tmp_path: Path, uri: str, caplog: pytest.LogCaptureFixture) -> None:
    from mlflow.exceptions import MlflowException

    strict, lenient = MlflowTracker(tracking_uri=uri, every=1), MlflowTracker(tracking_uri=uri, every=1,
                                                                              on_error="warn")
    for tracker in (strict, lenient):
        tracker("started", started(tmp_path))
        tracker.client.delete_run(tracker.run_id)  # a deleted run refuses every write
    with pytest.raises(MlflowException):
        strict("call", call(0))
    with caplog.at_level(logging.WARNING, logger="agentgrad.tracking"):
        lenient("call", call(0))
        lenient("call", call(1))
    assert lenient.errors == 2 and "tracking errors so far" in caplog.text


def test_params_are_flattened_to_dotted_keys_with_json_leaves() -> None:
    assert flatten("config", {"workers": {"rollout": 4}, "asynchronous": True, "delta": None, "name": "x",
                              "ids": [1, 2]}) == {"config.workers.rollout": "4", "config.asynchronous": "true",
                                                  "config.delta": "null", "config.name": "x",
                                                  "config.ids": "[1, 2]"}


def test_bad_settings_and_a_missing_mlflow_raise_config_errors(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="every"):
        MlflowTracker(tracking_uri=uri, every=0)
    with pytest.raises(ConfigError, match="on_error"):
        MlflowTracker(tracking_uri=uri, on_error="ignore")  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ConfigError, match=r"agentgrad\[mlflow\]"):
        MlflowTracker(tracking_uri=uri)


def test_importing_tracking_loads_neither_mlflow_nor_opentelemetry() -> None:
    code = ("import sys, agentgrad.tracking as t; assert t.JsonlEvents; "
            "print(sorted(m for m in ('mlflow', 'opentelemetry') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"

"""`MlflowTracker`: a callback that mirrors a run into MLflow: parameters, metrics over time, the final artifact.

MLflow is an optional extra (``pip install 'agentgrad[mlflow]'``); it is imported when a tracker is made.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from agentgrad.core._checks import integer, one_of
from agentgrad.errors import ConfigError
from agentgrad.store.sqlite import SQLiteStore

log = logging.getLogger("agentgrad.tracking")

RUN_KEY_TAG = "agentgrad.run_key"
# Metrics that are levels or samples, not running totals: a resumed run does not carry them over.
_SAMPLES = ("head/", "gate/", "val/", "test/")
_BATCH = 1000  # the most metrics MLflow takes in one log_batch request
_PARAM_BATCH = 100


def run_key(run_dir: str | Path) -> str:
    """The tag value that finds a run directory's MLflow run again on resume (hash of its absolute path)."""
    return hashlib.sha256(str(Path(run_dir).resolve()).encode("utf-8")).hexdigest()[:24]


def flatten(prefix: str, value: Any) -> dict[str, str]:
    """Nested mappings as dotted keys (`config.workers.rollout`), leaves as text (JSON for non-strings)."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(flatten(f"{prefix}.{key}" if prefix else str(key), item))
        return out
    return {prefix: value if isinstance(value, str) else json.dumps(value, default=str)}


class MlflowTracker:
    """Logs a run to MLflow as it happens; pass it in `evolve(..., callbacks=[tracker])`.

    On `started` it starts an MLflow run (a resumed run directory continues the MLflow run it started, found by
    the tag `agentgrad.run_key`) and logs the configuration, budget and split sizes as parameters. Running totals
    (calls per stage, errors, tokens, cost, proposals, verdicts per outcome, steps) and samples (head version,
    the gate's scores of each committed change, promotion checks) are buffered and sent with one `log_batch`
    at each optimizer step, every `every` calls and at the end; the metric step is the number of calls ended.
    On `finished` it logs the test and baseline rewards, the final artifact text (read from the run's store) as
    ``final/<artifact id>.txt``, and ends the MLflow run FINISHED, or FAILED if the run failed.

    Args:
        tracking_uri: where MLflow stores runs (None: MLflow's default, e.g. ``MLFLOW_TRACKING_URI``).
        experiment: the experiment name (created if missing).
        run_name: the MLflow run's name (None: the run directory's name).
        every: send the buffered metrics at least every this many calls.
        on_error: "raise" (a tracking failure stops the agentgrad run, which stays resumable) or "warn" (log a
            warning, count it in `errors` and go on; a failed batch's samples are lost, its totals go again with
            the next batch).
        clock: wall seconds for metric time stamps.
    State: the MLflow client, `run_id` (the current or last MLflow run), `active` (True from `started` to the
    run's end), `totals`, unsent samples, and `errors` (failures logged with on_error="warn"). Not thread-safe:
    callbacks are called from the run's event loop. `close()` (or leaving a `with` block) ends a run that never
    finished, as KILLED.
    """

    def __init__(self, *, tracking_uri: str | None = None, experiment: str = "agentgrad", run_name: str | None = None,
                 every: int = 50, on_error: Literal["raise", "warn"] = "raise",
                 clock: Callable[[], float] = time.time) -> None:
        try:
            import mlflow.entities as entities
            from mlflow.exceptions import MlflowException
            from mlflow.tracking import MlflowClient
        except ImportError as exc:
            raise ConfigError("MlflowTracker needs MLflow: pip install 'agentgrad[mlflow]'") from exc
        integer(every, "MlflowTracker(every=...)", low=1)
        one_of(on_error, "MlflowTracker(on_error=...)", ("raise", "warn"))
        self._entities: Any = entities
        self._failures: tuple[type[BaseException], ...] = (MlflowException, OSError)
        self.client: Any = MlflowClient(tracking_uri=tracking_uri)
        self.experiment, self.run_name, self.every, self.on_error = experiment, run_name, every, on_error
        self.clock = clock
        self.run_id: str | None = None
        self.active = False
        self.errors = 0
        self.totals: dict[str, float] = {}
        self._sent: dict[str, float] = {}
        self._samples: dict[str, float] = {}
        self._since_flush = 0
        self._run_dir: Path | None = None
        self._artifact = ""
        self._gate: dict[str, list[tuple[float, float]]] = {}
        self._handlers: dict[str, Callable[[Mapping[str, Any]], None]] = {
            "started": self._on_started, "call": self._on_call, "proposal": self._on_proposal,
            "proposal_failed": self._on_proposal_failed, "step": self._on_step, "decision": self._on_decision,
            "commit": self._on_commit, "step_done": self._on_step_done, "repair": self._on_repair,
            "promotion": self._on_promotion, "resumed": self._on_resumed, "failed": self._on_failed,
            "finished": self._on_finished}

    # -- the callback ----------------------------------------------------------------------------------------
    def __call__(self, kind: str, payload: Mapping[str, Any]) -> None:
        handler = self._handlers.get(kind)
        if handler is None:
            return
        if kind != "started" and not self.active:
            raise ValueError(f"MlflowTracker got a {kind!r} event outside a run (no 'started' event before it)")
        handler(payload)

    @property
    def step(self) -> int:
        """The metric step: how many calls of the user's functions have ended in this run (over resumes)."""
        return int(self.totals.get("calls/total", 0))

    def _add(self, key: str, amount: float = 1.0) -> None:
        self.totals[key] = self.totals.get(key, 0.0) + amount

    # -- handlers --------------------------------------------------------------------------------------------
    def _on_started(self, payload: Mapping[str, Any]) -> None:
        self.close()
        self._run_dir, self._artifact = Path(payload["run_dir"]), str(payload["artifact"])
        self.run_id, self.active = None, True
        self.totals, self._sent, self._samples, self._gate, self._since_flush = {}, {}, {}, {}, 0
        params = {"artifact": self._artifact, **flatten("config", payload["config"]),
                  **flatten("budget", payload["budget"]), **flatten("splits", payload["splits"])}
        self._guard(self._open_run, params, bool(payload["resuming"]))

    def _on_call(self, payload: Mapping[str, Any]) -> None:
        self._add("calls/total")
        self._add(f"calls/{payload['stage']}")
        if payload["error"] is not None:
            self._add("calls/errors")
        self._add("usage/tokens", float(payload["tokens"]))
        self._add("usage/cost", float(payload["cost"]))
        self._since_flush += 1
        if self._since_flush >= self.every:
            self.flush()

    def _on_proposal(self, payload: Mapping[str, Any]) -> None:
        if "trimmed" in payload:  # the same diff again, its passengers taken out (`runtime.trim`)
            self._add("proposals/trimmed_ops", len(payload["trimmed"]))
        else:
            self._add("proposals/made")

    def _on_proposal_failed(self, payload: Mapping[str, Any]) -> None:
        self._add("proposals/unusable")
        self._add(f"proposals/{payload['kind']}")

    def _on_repair(self, payload: Mapping[str, Any]) -> None:
        self._add("proposals/repairs")

    def _on_step(self, payload: Mapping[str, Any]) -> None:
        self._gate = {c["diff"]["id"]: [(float(r[1]), float(r[2])) for r in c["evidence"]["rows"]]
                      for c in payload["candidates"]}
        self._samples["head/version"] = float(payload["head"])

    def _on_decision(self, payload: Mapping[str, Any]) -> None:
        self._add(f"decisions/{payload['outcome']}")
        if payload["outcome"] != "accepted":
            return
        if "mean_delta" in payload["numbers"]:
            self._samples["gate/gain"] = float(payload["numbers"]["mean_delta"])
        ids = list(payload["parts"]) or [payload["diff_id"]]  # a fused diff's evidence is its parts' evidence
        rows = [row for i in ids for row in self._gate.get(i, [])]
        if rows:
            self._samples["gate/base_reward"] = sum(b for b, _ in rows) / len(rows)
            self._samples["gate/candidate_reward"] = sum(c for _, c in rows) / len(rows)

    def _on_commit(self, payload: Mapping[str, Any]) -> None:
        self._samples["head/version"] = float(payload["version"])

    def _on_step_done(self, payload: Mapping[str, Any]) -> None:
        self._add("steps")
        self.flush()

    def _on_promotion(self, payload: Mapping[str, Any]) -> None:
        self._add(f"promotions/{str(payload['outcome']).replace(' ', '_')}")
        if "dev_val" in payload:
            self._samples["val/dev"] = float(payload["dev_val"])
            self._samples["val/stable"] = float(payload["stable_val"])

    def _on_resumed(self, payload: Mapping[str, Any]) -> None:
        used = payload["used"]
        for stage in ("rollouts", "proposals", "gate_evals"):
            self.totals[f"calls/{stage}"] = float(used[stage])
        self.totals["calls/total"] = max(self.totals.get("calls/total", 0.0),
                                         sum(float(used[s]) for s in ("rollouts", "proposals", "gate_evals")))
        self.totals["usage/tokens"], self.totals["usage/cost"] = float(used["tokens"]), float(used["cost"])
        self.totals["steps"] = float(payload["steps"])
        self._guard(self._set_tag, "agentgrad.resumed_in_flight", str(payload["in_flight"]))

    def _on_failed(self, payload: Mapping[str, Any]) -> None:
        self._guard(self._set_tag, "agentgrad.error", str(payload["error"])[:5000])

    def _on_finished(self, payload: Mapping[str, Any]) -> None:
        reward, baseline = payload["test_reward"], payload["baseline"]
        for key, value in (("test/reward", reward), ("test/baseline", baseline)):
            if value is not None:
                self._samples[key] = float(value)
        if reward is not None and baseline is not None:
            self._samples["test/gain"] = float(reward) - float(baseline)
        self.flush()
        self._guard(self._log_final_artifact)
        self._end("FINISHED" if payload["ok"] else "FAILED")

    # -- talking to MLflow -----------------------------------------------------------------------------------
    def _guard(self, fn: Callable[..., None], *args: Any) -> bool:
        """Call `fn`; with on_error="warn", an MLflow or I/O failure is logged and counted instead. True if it ran."""
        if self.on_error == "raise":
            fn(*args)
            return True
        try:
            fn(*args)
        except self._failures as exc:
            self.errors += 1
            log.warning("MlflowTracker: %s failed (%d tracking errors so far): %s", fn.__name__, self.errors, exc)
            return False
        return True

    def _experiment_id(self) -> str:
        found = self.client.get_experiment_by_name(self.experiment)
        return str(found.experiment_id if found is not None else self.client.create_experiment(self.experiment))

    def _find_run(self, run_dir: Path) -> Any:
        found = self.client.get_experiment_by_name(self.experiment)
        if found is None:
            return None
        runs = self.client.search_runs([found.experiment_id], filter_string=f"tags.`{RUN_KEY_TAG}` = "
                                       f"'{run_key(run_dir)}'", order_by=["attributes.start_time DESC"],
                                       max_results=1)
        return runs[0] if runs else None

    def _open_run(self, params: Mapping[str, str], resuming: bool) -> None:
        assert self._run_dir is not None
        found = self._find_run(self._run_dir) if resuming else None
        if found is None:
            self._create_run(params)
        else:
            self._continue_run(found, params)

    def _create_run(self, params: Mapping[str, str]) -> None:
        assert self._run_dir is not None
        tags = {RUN_KEY_TAG: run_key(self._run_dir), "agentgrad.run_dir": str(self._run_dir.resolve()),
                "agentgrad.artifact": self._artifact}
        run = self.client.create_run(self._experiment_id(), run_name=self.run_name or self._run_dir.name, tags=tags)
        self.run_id = str(run.info.run_id)
        self._log_params(params)

    def _continue_run(self, run: Any, params: Mapping[str, str]) -> None:
        """Reopen `run`: totals resume from its latest metrics; new parameters are logged, changed ones tagged."""
        self.run_id = str(run.info.run_id)
        self.client.update_run(self.run_id, status="RUNNING")
        latest: Mapping[str, float] = run.data.metrics
        self.totals = {k: float(v) for k, v in latest.items() if not k.startswith(_SAMPLES)}
        self._sent = dict(self.totals)
        old: Mapping[str, str] = run.data.params
        self._log_params({k: v for k, v in params.items() if k not in old})
        resumes = int(run.data.tags.get("agentgrad.resumes", "0")) + 1
        changed = {f"agentgrad.resume{resumes}.{k}": v for k, v in params.items() if k in old and old[k] != v}
        tags = [self._entities.RunTag(k, v) for k, v in {**changed, "agentgrad.resumes": str(resumes)}.items()]
        self.client.log_batch(self.run_id, tags=tags)

    def _log_params(self, params: Mapping[str, str]) -> None:
        items = [self._entities.Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), _PARAM_BATCH):
            self.client.log_batch(self.run_id, params=items[i:i + _PARAM_BATCH])

    def _set_tag(self, key: str, value: str) -> None:
        if self.run_id is not None:
            self.client.set_tag(self.run_id, key, value)

    def flush(self) -> None:
        """Send the totals that changed since the last send, and the samples taken since (the last value of each),
        in one batch at the current step."""
        if not self.active or self.run_id is None:
            return
        stamp, step = int(self.clock() * 1000), self.step
        changed = {k: v for k, v in self.totals.items() if self._sent.get(k) != v}
        metrics = [self._entities.Metric(k, v, stamp, step) for k, v in changed.items()]
        metrics += [self._entities.Metric(k, v, stamp, step) for k, v in self._samples.items()]
        self._samples, self._since_flush = {}, 0
        if metrics and self._guard(self._send, metrics):
            self._sent.update(changed)

    def _send(self, metrics: list[Any]) -> None:
        for i in range(0, len(metrics), _BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + _BATCH])

    def _log_final_artifact(self) -> None:
        if self.run_id is None or self._run_dir is None:
            return
        with SQLiteStore(self._run_dir, git=False) as store:
            text = store.artifact(self._artifact).text
        self.client.log_text(self.run_id, text, f"final/{self._artifact}.txt")

    def _end(self, status: str) -> None:
        self.active = False
        if self.run_id is not None:
            self._guard(self.client.set_terminated, self.run_id, status)

    def close(self) -> None:
        """End a run that never reached `finished` (its metrics sent, status KILLED); nothing if none is active."""
        if self.active:
            self.flush()
            self._end("KILLED")

    def __enter__(self) -> MlflowTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

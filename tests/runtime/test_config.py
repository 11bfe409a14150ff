"""Run configuration: validation of each knob, and `evolve` honouring a given `RunConfig`."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgrad.errors import ConfigError
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.store.events import EventLog
from tests.runtime.helpers import agent, run


@pytest.mark.parametrize("fields", [{"rollout": 0}, {"propose": -1}, {"gate": 1.5}, {"threads": True},
                                    {"slots": 0}, {"slots": True}])
def test_workers_refuse_counts_below_one_and_non_ints(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="Workers"):
        Workers(**fields)


def test_run_slots_default_to_rollout_plus_gate_and_follow_an_explicit_value() -> None:
    assert Workers(rollout=3, gate=2).run_slots == 5
    assert Workers(rollout=3, gate=2, slots=1).run_slots == 1
    assert Workers.of(8) == Workers(rollout=8, propose=4, gate=4)


def test_repair_policy_needs_a_callable_repair() -> None:
    with pytest.raises(ConfigError, match="repair callback"):
        Staleness(policy=StalePolicy.REPAIR)
    with pytest.raises(ConfigError, match="repair must be a function"):
        Staleness(policy=StalePolicy.REPAIR, repair="fix it")  # type: ignore[arg-type]
    assert Staleness(policy="repair", repair=lambda diff, text: text).policy is StalePolicy.REPAIR  # type: ignore[arg-type]


@pytest.mark.parametrize("fields", [{"async_ratio": -1}, {"alpha_max": -2}, {"alpha_max": 1.5}])
def test_staleness_refuses_negative_or_fractional_lags(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Staleness(**fields)


@pytest.mark.parametrize("fields", [{"timeout": 0}, {"timeout": -1.0}, {"timeout": math.nan}, {"timeout": math.inf},
                                    {"max_batch": 0}, {"seed": "zero"}, {"hedge": -1}, {"hedge": math.nan},
                                    {"hedge": "x"}, {"inline_reward": "yes"}, {"fuse_wait": -1}])
def test_run_config_refuses_bad_timeouts_batches_seeds_and_knobs(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=f"RunConfig.{next(iter(fields))}"):
        RunConfig(**fields)


@pytest.mark.parametrize("fields", [{"chunk": 0}, {"max_examples": 0}, {"chunk": 2.5}])
def test_gate_config_refuses_empty_chunks(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="GateConfig"):
        GateConfig(**fields)


BAD_KNOBS: list[tuple[Callable[..., Any], dict[str, Any], str]] = [
    (Workers, {"adaptive": 1}, r"^Workers.adaptive must be True or False, got 1$"),
    (Staleness, {"policy": "bogus"}, r"^Staleness.policy must be one of 'keep', 'discard', 'repair', got 'bogus'$"),
    (Staleness, {"policy": None}, r"^Staleness.policy must be one of .* got None$"),
    (GateConfig, {"screen": 1}, r"^GateConfig.screen must be True or False, got 1$"),
    (GateConfig, {"early_stop": "yes"}, r"^GateConfig.early_stop must be True or False, got 'yes'$"),
    (GateConfig, {"trim": 1}, r"^GateConfig.trim must be True or False, got 1$"),
    (Acceptance, {"margin": math.nan}, r"^Acceptance.margin must be a number in \[0, 1\), got nan$"),
    (Acceptance, {"margin": "x"}, r"^Acceptance.margin must be a number in \[0, 1\), got 'x'$"),
    (Acceptance, {"delta": math.nan}, r"^constant value must be a finite number, got nan$"),
    (Acceptance, {"delta": 0.9}, r"^a delta schedule must stay inside \(0, 0.5\)"),
    (Acceptance, {"delta": "0.05"}, r"^delta must be a number or a Schedule, got str$"),
    (RunConfig, {"asynchronous": 1}, r"^RunConfig.asynchronous must be True or False, got 1$"),
    (RunConfig, {"workers": 3}, r"^RunConfig.workers must be a Workers \(Workers.of\(n\) for a count\), got int$"),
    (RunConfig, {"workers": {"rollout": 2}}, r"^RunConfig.workers must be a Workers .* got dict$"),
    (RunConfig, {"staleness": None}, r"^RunConfig.staleness must be a Staleness, got NoneType$"),
    (RunConfig, {"gate": None}, r"^RunConfig.gate must be a GateConfig, got NoneType$"),
    (RunConfig, {"acceptance": 0.05}, r"^RunConfig.acceptance must be an Acceptance, got float$"),
    (RunConfig, {"trust_region": None}, r"^RunConfig.trust_region must be a TrustRegion, got NoneType$"),
]


@pytest.mark.parametrize(("kind", "fields", "says"), BAD_KNOBS,
                         ids=[f"{kind.__name__}.{next(iter(fields))}" for kind, fields, _ in BAD_KNOBS])
def test_wrong_types_of_knobs_and_nested_configs_are_one_config_error(kind: Callable[..., Any], fields: dict[str, Any],
                                                                      says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        kind(**fields)


def test_evolve_keeps_the_given_config_unless_told_otherwise(tmp_path: Path) -> None:
    config = RunConfig(workers=Workers(rollout=2, propose=1, gate=1), asynchronous=False, seed=5)
    bot = agent()
    result = run(tmp_path, bot, budget=Budget(rollouts=6, gate_evals=50), config=config, workers=None, seed=None)
    assert result.ok, result.error
    log = EventLog(tmp_path)
    saved = log.get("config")["run"]
    log.close()
    assert saved["asynchronous"] is False and saved["seed"] == 5
    assert saved["workers"] == {"rollout": 2, "propose": 1, "gate": 1, "slots": 3, "adaptive": True}
    assert result.counts["rounds"] >= 1 and "rollout_dispatch" not in result.counts  # the synchronous runtime

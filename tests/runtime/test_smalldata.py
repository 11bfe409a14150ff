"""Too little data is said at once: the least evidence a commit needs against what the gate can ever gather."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentgrad.data.splits import Splits
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, DataTooSmallError
from agentgrad.optim.futility import PassThresholds
from agentgrad.optim.stats import SIGN_TEST_PRIOR, prob_improvement
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.smalldata import GatePower, gate_power

DELTA, MARGIN = 0.035, 0.02  # the first look's share (0.7) of the default δ = 0.05; the default margin


def power(n_val: int, n_train: int, gate: GateConfig | None = None, delta: float = DELTA) -> GatePower:
    return gate_power(n_val=n_val, n_train=n_train, gate=gate or GateConfig(), delta=delta, margin=MARGIN,
                      prior=SIGN_TEST_PRIOR)


def test_the_default_first_look_spends_0_7_of_delta_0_05() -> None:
    acceptance = RunConfig().acceptance
    assert acceptance.look_delta(acceptance.delta, 1) == pytest.approx(DELTA)  # type: ignore[arg-type]


def test_five_wins_are_needed_at_the_defaults() -> None:
    assert power(50, 0).need == 5
    assert PassThresholds(delta=DELTA, margin=MARGIN, prior=SIGN_TEST_PRIOR).need(0) == 5
    assert prob_improvement(5, 0, margin=MARGIN, prior=SIGN_TEST_PRIOR) > 1 - DELTA
    assert prob_improvement(4, 0, margin=MARGIN, prior=SIGN_TEST_PRIOR) <= 1 - DELTA


def test_a_larger_delta_needs_fewer_wins() -> None:
    assert power(50, 0, delta=0.2).need < power(50, 0).need


def test_a_validation_split_of_one_on_the_val_pool_is_refused_naming_the_least_number_and_the_fix() -> None:
    with pytest.raises(DataTooSmallError) as caught:
        power(1, 20, GateConfig(pool="val"))
    message = str(caught.value)
    assert "at most 1 task(s)" in message
    assert "needs at least 2 tasks, each a win" in message
    assert "at least 2 validation tasks" in message
    assert "pool='train+val'" in message


def test_three_validation_tasks_can_commit_through_the_calibrated_test() -> None:
    found = power(3, 0, GateConfig(pool="val"))  # 3 wins of 3 beat the noise prior's bound: p = 0.18^3 < 0.035
    assert (found.need, found.most) == (3, 3)


def test_data_too_small_is_a_config_error() -> None:
    assert issubclass(DataTooSmallError, ConfigError)


def test_the_auto_pool_widens_a_small_validation_split_with_training_tasks_and_says_so() -> None:
    found = power(3, 6, GateConfig(pool="auto"))
    assert found == GatePower(need=4, most=3 + 5, widened=True, n_val=3, n_train=6)  # the origin task left out
    note = found.protocol()
    assert note.startswith("; ")
    assert "validation and training tasks together (3 + 6" in note
    assert "origin task" in note and "promotion to stable is confirmed on the validation split" in note


def test_the_auto_pool_keeps_a_large_enough_validation_split_alone() -> None:
    found = power(100, 300, GateConfig(pool="auto", max_examples=None))
    assert (found.widened, found.most) == (False, 100)
    assert found.protocol() == ""


def test_the_val_pool_never_widens() -> None:
    found = power(6, 30, GateConfig(pool="val", max_examples=None))
    assert (found.widened, found.most) == (False, 6)
    assert found.protocol() == ""


def test_the_train_and_val_pool_widens_even_a_large_split() -> None:
    found = power(200, 10, GateConfig(pool="train+val", max_examples=None))
    assert (found.widened, found.most) == (True, 209)
    assert found.protocol() != ""


def test_no_training_tasks_means_no_widening() -> None:
    found = power(7, 0, GateConfig(pool="train+val"))
    assert (found.widened, found.most) == (False, 7)


def test_exactly_the_need_is_enough() -> None:
    assert power(2, 0, GateConfig(pool="val")).most == 2
    assert power(1, 2, GateConfig(pool="auto")).most == 2  # 1 + (2 - 1)
    with pytest.raises(DataTooSmallError):
        power(1, 0, GateConfig(pool="val"))
    with pytest.raises(DataTooSmallError):
        power(1, 1, GateConfig(pool="auto"))


@pytest.mark.parametrize("pool", ["auto", "train+val"])
def test_a_tiny_set_is_refused_even_widened_naming_how_many_tasks_to_add(pool: str) -> None:
    with pytest.raises(DataTooSmallError) as caught:
        power(1, 1, GateConfig(pool=pool))
    message = str(caught.value)
    assert "at most 1 task(s) (1 validation, 1 training)" in message
    assert "add at least 1 validation task(s) or 1 training task(s)" in message


def test_max_examples_below_the_need_is_refused_naming_max_examples() -> None:
    with pytest.raises(DataTooSmallError) as caught:
        power(40, 0, GateConfig(pool="val", max_examples=1))
    message = str(caught.value)
    assert "at most 1 task(s)" in message
    assert "max_examples" in message and "at least 2" in message


def test_max_examples_cuts_the_most_a_candidate_is_scored_on() -> None:
    assert power(40, 40, GateConfig(pool="train+val", max_examples=5)).most == 5
    assert power(40, 40, GateConfig(pool="train+val", max_examples=None)).most == 79


def test_the_message_names_the_rules_settings() -> None:
    with pytest.raises(DataTooSmallError, match=re.escape("delta=0.035, margin=0.02")):
        power(1, 0, GateConfig(pool="val"))


def never_run(rendered: str, task: Task) -> str:
    raise AssertionError("run was called on a refused run")


def never_propose(rendered: str, task: Task, output: str | None, reward: float) -> str:
    raise AssertionError("propose was called on a refused run")


def three_splits() -> Splits:
    one, two, three = ([Task(f"t{i}", f"question {i}", "yes")] for i in range(3))
    return Splits(tuple(one), tuple(two), tuple(three), "one task each")


def test_evolve_refuses_too_little_data_before_creating_the_run_directory(tmp_path: Path) -> None:
    store = tmp_path / "r"
    with pytest.raises(DataTooSmallError, match="at least 2 validation tasks"):
        evolve(three_splits(), lambda task, output: 1.0, run=never_run, propose=never_propose,
               budget=Budget(calls=20), config=RunConfig(gate=GateConfig(pool="val")), store=store)
    assert not store.exists()


def test_evolve_refuses_one_task_a_split_even_on_the_widened_pool(tmp_path: Path) -> None:
    store = tmp_path / "r"
    with pytest.raises(DataTooSmallError, match="add at least"):
        evolve(three_splits(), lambda task, output: 1.0, run=never_run, propose=never_propose,
               budget=Budget(calls=20), store=store)
    assert not store.exists()


def test_a_widened_run_says_so_in_its_protocol(tmp_path: Path) -> None:
    tasks = [Task(f"t{i}", f"question {i}", "yes") for i in range(12)]  # 6 / 3 / 3
    result = evolve(tasks, lambda task, output: 0.0, run=lambda rendered, task: "no",
                    propose=lambda rendered, task, output, reward: "- say yes", budget=Budget(calls=20),
                    store=tmp_path / "r", seed=0)
    assert result.ok, result.error
    assert "validation and training tasks together (3 + 6" in result.protocol

"""The [budget] and [run] tables follow the runtime's dataclasses: every `RunConfig` and `Budget` field (walked
with `dataclasses.fields`, nested ones too) can be set from a file and arrives in what the CLI builds; defaults are
the runtime's; a bad value or an unknown key gets one line naming its dotted key; the dataclasses' own checks are
reported at the key they reject."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agentgrad.cli.config import ConfigFileError, ConfigSource, parse_config
from agentgrad.cli.launch import _options
from agentgrad.cli.schema import CliConfig
from agentgrad.cli.tables import Schema
from agentgrad.errors import ConfigError
from agentgrad.optim.schedules import Linear
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers
from agentgrad.runtime.gateconfig import GateConfig
from tests.cli.helpers import ROOT

TASK = {"task": {"set": "arithmetic"}, "model": {"name": "openai:gpt-4o-mini"}}
# str fields whose valid values a generic rule cannot guess
STRINGS = {"gate.pool": "val", "parallel": "sections", "acceptance.rule": "mean"}
FUNCTIONS = {"staleness.repair"}  # function fields: no key (the repair comes from [model] repair or the world)


@dataclass(frozen=True)
class Leaf:
    """A field that holds a value (not a nested dataclass): its dotted path, annotation and default."""

    path: str
    annotation: Any
    default: Any


def _default(item: dataclasses.Field[Any]) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    assert item.default_factory is not dataclasses.MISSING, item.name
    return item.default_factory()


def leaves(cls: type, default: Any, prefix: str = "") -> Iterator[Leaf]:
    """Every field of `cls`, nested dataclasses walked into, with the default it has in `default`."""
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        value = getattr(default, item.name) if default is not None else _default(item)
        path = f"{prefix}{item.name}"
        if dataclasses.is_dataclass(value):
            yield from leaves(type(value), value, f"{path}.")
        else:
            yield Leaf(path, hints[item.name], value)


def _is_function(annotation: Any) -> bool:
    return any(typing.get_origin(arg) is Callable for arg in (typing.get_args(annotation) or (annotation,)))


def other_value(leaf: Leaf) -> Any:
    """A valid value for `leaf` that is not its default."""
    value = leaf.default
    if leaf.path in STRINGS:
        return STRINGS[leaf.path]
    if isinstance(value, bool):
        return not value
    if isinstance(value, Enum):
        return next(member for member in type(value) if member != value)
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return round(value * 1.1, 6)
    if value is None:
        kinds = [arg for arg in typing.get_args(leaf.annotation) if arg is not type(None)]
        return 3 if int in kinds else 1.5
    raise AssertionError(f"{leaf.path}: no rule for a {type(value).__name__}; add it to STRINGS")


def nest(values: dict[str, Any]) -> dict[str, Any]:
    """{"gate.chunk": 9} as {"gate": {"chunk": 9}}."""
    tree: dict[str, Any] = {}
    for path, value in values.items():
        *tables, key = path.split(".")
        node = tree
        for name in tables:
            node = node.setdefault(name, {})
        node[key] = value.value if isinstance(value, Enum) else value
    return tree


def toml(tree: dict[str, Any], prefix: str = "") -> str:
    """A TOML document of `tree`: scalars as keys, dicts as (nested) tables."""
    def scalar(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value) if isinstance(value, str) else repr(value)

    keys = [f"{k} = {scalar(v)}\n" for k, v in tree.items() if not isinstance(v, dict)]
    text = (f"[{prefix}]\n" if prefix else "") + "".join(keys)
    return text + "".join(toml(v, f"{prefix}.{k}" if prefix else k) for k, v in tree.items() if isinstance(v, dict))


def parse(tree: dict[str, Any], form: str = "toml") -> CliConfig:
    text = toml(tree) if form == "toml" else importlib.import_module("yaml").safe_dump(tree)  # PyYAML: no stubs
    return parse_config(ConfigSource(text, "toml" if form == "toml" else "yaml", str(ROOT), f"t.{form}"))


def problems(tree: dict[str, Any]) -> list[str]:
    try:
        parse(tree)
    except ConfigFileError as exc:
        return list(exc.problems)
    raise AssertionError("the configuration was accepted")


def replaced(value: Any, path: str, new: Any) -> Any:
    """`value` with the field at dotted `path` set to `new`."""
    name, _, rest = path.partition(".")
    return dataclasses.replace(value, **{name: replaced(getattr(value, name), rest, new) if rest else new})


RUN_LEAVES = [leaf for leaf in leaves(RunConfig, RunConfig()) if leaf.path not in FUNCTIONS]
BUDGET_LEAVES = list(leaves(Budget, None))


def test_every_run_config_field_set_in_a_file_arrives_in_the_run_config(tmp_path: Path) -> None:
    functions = {leaf.path for leaf in leaves(RunConfig, RunConfig()) if _is_function(leaf.annotation)}
    assert functions == FUNCTIONS  # a new function field needs a way in from the file: say which
    chosen = {leaf.path: other_value(leaf) for leaf in RUN_LEAVES}
    expected = RunConfig()
    for path, value in chosen.items():
        expected = replaced(expected, path, value)
    for form in ("toml", "yaml"):
        config = parse({**TASK, "budget": {"rollouts": 10}, "run": nest(chosen)}, form)
        built = _options(config, tmp_path, [], None)["config"]
        assert built == expected
        for path, value in chosen.items():
            got = built
            for name in path.split("."):
                got = getattr(got, name)
            assert got == value, path


def test_every_budget_field_set_in_a_file_arrives_in_the_budget(tmp_path: Path) -> None:
    chosen = {leaf.path: other_value(leaf) for leaf in BUDGET_LEAVES}
    config = parse({**TASK, "budget": chosen})
    assert _options(config, tmp_path, [], None)["budget"] == Budget(**chosen)


@pytest.mark.parametrize("run", [{}, {"store": "runs/x"}, {"gate": {}, "acceptance": {}, "staleness": {},
                                                                "workers": {}}])
def test_keys_left_out_keep_the_runtime_defaults(tmp_path: Path, run: dict[str, Any]) -> None:
    config = parse({**TASK, "budget": {"rollouts": 10}, **({"run": run} if run else {})})
    assert config.run.config == RunConfig()
    built = _options(config, tmp_path, [], None)
    assert built["config"] == RunConfig() and built["config"].staleness.repair is None
    assert built["budget"] == Budget(rollouts=10)
    assert config.run.store == run.get("store")


@pytest.mark.parametrize("leaf", RUN_LEAVES + BUDGET_LEAVES, ids=lambda leaf: leaf.path)
def test_a_value_of_the_wrong_type_names_its_dotted_key(leaf: Leaf) -> None:
    section = "budget" if leaf in BUDGET_LEAVES else "run"
    wrong = 7 if isinstance(leaf.default, str) else "x"
    budget = {"rollouts": 10} if section == "run" else {}
    (problem,) = problems({**TASK, "budget": budget, **nest({f"{section}.{leaf.path}": wrong})})
    assert problem.startswith(f"{section}.{leaf.path}: expected ")


@pytest.mark.parametrize(("path", "value", "says"), [
    ("run.gate.chunk", 0, "GateConfig.chunk must be an int >= 1"),
    ("run.gate.pool", "everything", "GateConfig.pool must be one of"),
    ("run.gate.futility", 0.7, "[0, 0.5)"),
    ("run.workers.rollout", 0, "Workers.rollout must be an int >= 1"),
    ("run.workers.slots", 0, "Workers.slots must be an int >= 1 or None"),
    ("run.staleness.alpha_max", -1, "must be >= 0"),
    ("run.acceptance.looks", 0, "looks must be an int >= 1"),
    ("run.acceptance.promise", 0.4, "promise must be a number in (0.5, 1)"),
    ("run.acceptance.delta", 0.7, "inside (0, 0.5)"),
    ("run.max_batch", 0, "RunConfig.max_batch must be an int >= 1"),
    ("run.fuse_wait", -1.0, "RunConfig.fuse_wait must be None or a finite number"),
    ("run.timeout", math.inf, "RunConfig.timeout must be a finite number"),
    ("run.workers", 0, "workers must be an int >= 1"),
    ("budget.cost", -1.0, "Budget.cost must be a finite number >= 0"),
])
def test_a_check_of_the_runtime_is_reported_at_the_key_it_rejects(path: str, value: Any, says: str) -> None:
    (problem,) = problems({**TASK, **nest({"budget.rollouts": 10, path: value})})
    assert problem.startswith(f"{path}: ") and says in problem


def test_problems_in_several_keys_of_a_table_are_each_reported() -> None:
    found = problems({**TASK, "budget": {"rollouts": 10}, "run": {"gate": {"chunk": 0, "focus": -1}}})
    assert [p.split(":")[0] for p in found] == ["run.gate.chunk", "run.gate.focus"]


def test_a_check_over_several_keys_is_reported_at_the_table() -> None:
    (problem,) = problems({**TASK, "budget": {"tokens_per_call": 5}})
    assert problem.startswith("budget: ") and "at least one limit" in problem


@pytest.mark.parametrize(("table", "owner"), [("run", RunConfig), ("run.gate", GateConfig),
                                               ("run.acceptance", Acceptance), ("run.staleness", Staleness),
                                               ("run.workers", Workers), ("budget", Budget)])
def test_an_unknown_key_names_itself_and_the_keys_of_its_table(table: str, owner: type) -> None:
    (problem,) = problems({**TASK, **nest({"budget.rollouts": 10, f"{table}.bogus": 1})})
    assert problem.startswith(f"{table}.bogus: unknown key; expected one of ")
    section = table.partition(".")[2]
    keys = [item.name for item in dataclasses.fields(owner) if f"{section}.{item.name}" not in FUNCTIONS]
    assert all(repr(key) in problem for key in keys)


def test_workers_as_an_int_is_workers_of() -> None:
    assert parse({**TASK, "budget": {"rollouts": 1}, "run": {"workers": 6}}).run.config.workers == Workers.of(6)


def test_workers_neither_an_int_nor_a_table_is_one_line() -> None:
    (problem,) = problems({**TASK, "budget": {"rollouts": 1}, "run": {"workers": "many"}})
    assert problem.startswith("run.workers: expected an int") and "a table of rollout" in problem


def test_delta_as_a_schedule_table_is_that_schedule() -> None:
    delta = {"name": "linear", "start": 0.1, "end": 0.02, "steps": 10}
    config = parse({**TASK, "budget": {"rollouts": 1}, "run": {"acceptance": {"delta": delta}}})
    assert config.run.config.acceptance.delta == Linear(0.1, 0.02, 10)
    (problem,) = problems({**TASK, "budget": {"rollouts": 1}, "run": {"acceptance": {"delta": {"name": "x"}}}})
    assert problem.startswith("run.acceptance.delta: unknown schedule 'x'")


def test_the_repair_policy_gets_the_model_repair_function_at_launch(tmp_path: Path) -> None:
    (tmp_path / "my_repair_mod.py").write_text("def repair(diff, head):\n    return 'x'\n")
    model = {"run": "os:getcwd", "propose": "os:getcwd", "repair": "my_repair_mod:repair"}
    text = toml({"task": {"set": "arithmetic"}, "model": model, "budget": {"rollouts": 1},
                 "run": {"staleness": {"policy": "repair"}}})
    config = parse_config(ConfigSource(text, "toml", str(tmp_path), "t.toml"))
    assert config.run.config.staleness.policy is StalePolicy.REPAIR

    def repair(diff: Any, head: str) -> str:
        return head

    assert _options(config, tmp_path, [], repair)["config"].staleness.repair is repair
    assert _options(parse({**TASK, "budget": {"rollouts": 1}}), tmp_path, [], repair)["config"].staleness.repair \
        is None


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    size: int = 3

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ConfigError(f"Inner.size must be >= 1, got {self.size}")


@dataclass(frozen=True)
class Outer:
    inner: Inner = field(default_factory=lambda: Inner(size=5))
    colour: Colour = Colour.RED
    ratio: float | None = None


OUTER = TypeAdapter(Annotated[Outer, Schema().table(Outer)])


def test_a_dataclass_the_cli_has_never_seen_gets_a_table_with_its_defaults_and_checks() -> None:
    assert OUTER.validate_python({}) == Outer()
    assert OUTER.validate_python({"inner": {}}).inner == Inner(size=5)  # the parent's default, not the class's
    assert OUTER.validate_python({"colour": "blue", "ratio": 2}) == Outer(colour=Colour.BLUE, ratio=2.0)
    with pytest.raises(ValidationError) as caught:
        OUTER.validate_python({"inner": {"size": 0}, "shade": 1})
    assert [(e["loc"], e["type"]) for e in caught.value.errors()] == [(("inner", "size"), "value_error"),
                                                                      (("shade",), "extra_forbidden")]
    with pytest.raises(ValidationError) as caught:
        OUTER.validate_python({"inner": {"size": 0}})
    (error,) = caught.value.errors()
    assert error["loc"] == ("inner", "size") and "Inner.size must be >= 1" in error["msg"]

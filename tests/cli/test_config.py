"""Configuration files: TOML and YAML agree, the shipped examples validate, and every kind of mistake gets one
clear line naming the key and what was expected, with exit code 2 and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgrad.cli.config import ConfigFileError, ConfigSource, load_config, parse_config
from tests.cli.helpers import ROOT, cli, cli_process

BASE = """
[task]
set = "arithmetic"

[model]
name = "openai:gpt-4o-mini"

[budget]
rollouts = 10
"""


def _parse(text: str, folder: Path | None = None) -> list[str]:
    try:
        parse_config(ConfigSource(text, "toml", str(folder or ROOT), "test.toml"))
    except ConfigFileError as exc:
        return list(exc.problems)
    return []


def test_toml_and_yaml_examples_give_the_same_configuration() -> None:
    folder = ROOT / "examples" / "configs"
    for stem in ("world", "sentiment"):
        _, from_toml = load_config(folder / f"{stem}.toml")
        _, from_yaml = load_config(folder / f"{stem}.yaml")
        assert from_toml == from_yaml


def test_the_toml_examples_of_the_cli_page_are_valid() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    blocks = [block.split("```", 1)[0] for block in page.split("```toml\n")[1:]]
    assert blocks
    for block in blocks:
        assert _parse(block) == [], block


def test_valid_configuration_is_accepted_with_defaults_filled_in() -> None:
    assert _parse(BASE) == []
    config = parse_config(ConfigSource(BASE, "toml", str(ROOT), "test.toml"))
    assert config.run.config.workers.rollout == 4 and config.run.config.asynchronous
    assert config.budget.rollouts == 10 and config.budget.gate_evals is None


def test_run_settings_reach_the_run_config(tmp_path: Path) -> None:
    from agentgrad.cli.launch import _options

    text = BASE + "[run]\ntimeout = 30\nhedge = 2.5\nfuse_wait = 0\ninline_reward = false\n"
    config = parse_config(ConfigSource(text, "toml", str(ROOT), "t.toml"))
    run = _options(config, tmp_path, [], None)["config"]
    assert (run.timeout, run.hedge, run.fuse_wait, run.inline_reward) == (30.0, 2.5, 0.0, False)
    default = _options(parse_config(ConfigSource(BASE, "toml", str(ROOT), "t.toml")), tmp_path, [], None)["config"]
    assert (default.timeout, default.hedge, default.inline_reward) == (120.0, 4.0, True)


def test_workers_as_an_int_splits_like_workers_of() -> None:
    config = parse_config(ConfigSource(BASE + "[run]\nworkers = 8\n", "toml", str(ROOT), "t.toml"))
    workers = config.run.config.workers
    assert (workers.rollout, workers.propose, workers.gate) == (8, 4, 4)


@pytest.mark.parametrize(("text", "key", "expected"), [
    (BASE.replace("[budget]\nrollouts = 10\n", ""), "budget", "required"),
    (BASE.replace("rollouts = 10", 'rollouts = "ten"'), "budget.rollouts", "valid integer"),
    (BASE.replace("rollouts = 10", "rollouts = -1"), "budget.rollouts", "must be an int >= 0"),
    (BASE.replace("rollouts = 10", "cost = 1.0\ncots = 2.0"), "budget.cots", "unknown key"),
    (BASE.replace('"openai:gpt-4o-mini"', '"gemini:pro"'), "model.name", "'openai:<model>'"),
    (BASE.replace('name = "openai:gpt-4o-mini"', 'run = "no_such_module_xyz:run"\npropose = "os:getcwd"'),
     "model.run", "does not import"),
    (BASE.replace('name = "openai:gpt-4o-mini"', 'run = "os:no_such_function"\npropose = "os:getcwd"'),
     "model.run", "has no 'no_such_function'"),
    (BASE.replace('set = "arithmetic"', 'set = "poems"'), "task.set", "shipped sets"),
    (BASE.replace('set = "arithmetic"', 'path = "missing.jsonl"'), "task.path", "does not exist"),
    (BASE.replace('set = "arithmetic"', 'set = "arithmetic"\nscore = "fuzzy"'), "task.score", "built-in scorer"),
    (BASE.replace('set = "arithmetic"', 'set = "arithmetic"\npath = "src/agentgrad/data/sets/dates.jsonl"'),
     "task", "exactly one of"),
    (BASE.replace("[budget]\nrollouts = 10", "[budget]\ntokens_per_call = 5"), "budget", "at least one limit"),
    (BASE + "[run]\nworkers = 0\n", "run.workers", "int >= 1"),
    (BASE + "[run]\nasynchronous = 1\n", "run.asynchronous", "valid boolean"),
    (BASE + "[run]\nworkers = \"many\"\n", "run.workers", "a table of rollout"),
    (BASE + "[run]\nhedge = -1\n", "run.hedge", "finite factor >= 0"),
    (BASE + "[run]\ntimeout = 0\n", "run.timeout", "seconds > 0"),
    ("[task]\nworld = 3\n[budget]\nrollouts = 4\n", "task.world", "expected a table (got 3)"),
    (BASE + "[run]\nstaleness = { policy = \"repair\" }\n", "(top level)", "model.repair"),
    ('[task]\nworld = { p_right = 0.9 }\n[budget]\nrollouts = 4\n', "task.world", "must sum to 1"),
    ('[task]\nworld = {}\n[model]\nname = "local"\n[budget]\nrollouts = 4\n', "(top level)", "remove the [model]"),
])
def test_each_mistake_is_one_line_naming_the_key(text: str, key: str, expected: str) -> None:
    problems = _parse(text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{key}: ")
    assert expected in problems[0]


def test_unknown_key_lists_the_keys_that_are_allowed() -> None:
    (problem,) = _parse(BASE.replace("[model]", "[model]\ntemperature = 0.2"))
    assert problem.startswith("model.temperature: unknown key")
    assert "'name'" in problem and "'propose'" in problem


def test_syntax_errors_are_reported_with_their_place() -> None:
    assert "line 1" in _parse("[task\n")[0]
    try:
        parse_config(ConfigSource("task: [unclosed\n", "yaml", str(ROOT), "t.yaml"))
    except ConfigFileError as exc:
        assert exc.problems[0].startswith("not valid YAML") and "line" in exc.problems[0]
    else:
        raise AssertionError("broken YAML was accepted")


def test_callable_next_to_the_config_file_imports(tmp_path: Path) -> None:
    (tmp_path / "my_scoring_mod.py").write_text("def score(output, expected):\n    return 1.0\n")
    text = BASE.replace('set = "arithmetic"', 'set = "arithmetic"\nscore = "my_scoring_mod:score"')
    assert _parse(text, tmp_path) == []


@pytest.mark.parametrize(("text", "key"), [
    (BASE.replace("rollouts = 10", 'rollouts = "ten"'), "budget.rollouts"),
    (BASE.replace('"openai:gpt-4o-mini"', '"gemini:pro"'), "model.name"),
    (BASE.replace('name = "openai:gpt-4o-mini"', 'run = "nope_xyz:run"\npropose = "os:getcwd"'), "model.run"),
    (BASE.replace("[budget]\nrollouts = 10\n", ""), "budget"),
])
def test_run_with_an_invalid_file_exits_2_with_one_message(tmp_path: Path, text: str, key: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    result = cli("run", config, "--run-dir", tmp_path / "run")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {config}: {key}: ")
    assert not (tmp_path / "run").exists()  # nothing was created


def test_invalid_yaml_file_as_a_real_process_exits_2_without_traceback(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("task:\n  world: {seed: 1}\nbudget:\n  rollouts: ten\n")
    done = cli_process("run", config, "--run-dir", tmp_path / "run")
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {config}: budget.rollouts: expected a valid integer (got 'ten')"
    assert "Traceback" not in done.stderr


def test_wrong_suffix_and_missing_file_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{}")
    assert cli("run", tmp_path / "c.json").exit_code == 2
    assert cli("run", tmp_path / "absent.toml").exit_code == 2

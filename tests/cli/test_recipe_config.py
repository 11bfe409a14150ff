"""A configuration file can run a published method: ``[recipe] name = "gepa"``, with its reflector and options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentgrad.store.sqlite import SQLiteStore
from tests.cli.helpers import cli
from tests.cli.test_config import _parse

MODULE = '''
from agentgrad.testing import routing_standin

run = routing_standin.solve


def reflect(messages, **params):
    prompt = messages[-1].content
    current = prompt.split("```\\n", 1)[1].split("```", 1)[0].strip()
    new = [line for line in routing_standin.lessons(prompt) if line not in current]
    return "```\\n" + "\\n".join([current, *new]).strip() + "\\n```"
'''

CONFIG = """
[task]
set = "routing"
skill = "Route the tickets."

[model]
run = "my_recipe_mod:run"

[recipe]
name = "gepa"
reflector = "my_recipe_mod:reflect"
options = { minibatch = 3 }

[budget]
calls = 160

[run]
workers = 4
asynchronous = false
seed = 1
"""


def test_a_recipe_runs_from_a_configuration_file(tmp_path: Path) -> None:
    (tmp_path / "my_recipe_mod.py").write_text(MODULE)
    config = tmp_path / "gepa.toml"
    config.write_text(CONFIG)
    result = cli("run", config, "--run-dir", tmp_path / "run", "--quiet")
    assert result.exit_code == 0, result.stdout + result.stderr
    with SQLiteStore(tmp_path / "run", git=False) as store:
        learned = store.artifact(store.artifact_ids()[0]).text
    assert "tickets go to" in learned


def test_an_unknown_recipe_or_a_recipe_on_the_world_task_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "my_recipe_mod.py").write_text(MODULE)
    problems = _parse(CONFIG.replace('name = "gepa"', 'name = "gepa2"'), tmp_path)
    assert len(problems) == 1 and "recipe.name" in problems[0] and "gepa2" in problems[0]
    without = CONFIG.replace('reflector = "my_recipe_mod:reflect"\n', "")
    assert any("reflector" in p for p in _parse(without, tmp_path))


@pytest.mark.parametrize(("options", "says"), [
    ("{ bogus = 1 }", r"^recipe: options \['bogus'\] are not options of recipe 'gepa'; it takes \[.*'minibatch'"),
    ("{ seed = 1 }", r"^recipe: options \['seed'\] are set by the other sections"),
])
def test_recipe_options_the_recipe_does_not_take_are_one_problem_naming_them(tmp_path: Path, options: str,
                                                                             says: str) -> None:
    (tmp_path / "my_recipe_mod.py").write_text(MODULE)
    problems = _parse(CONFIG.replace("options = { minibatch = 3 }", f"options = {options}"), tmp_path)
    assert len(problems) == 1 and re.match(says, problems[0]), problems


def test_a_recipe_option_of_the_wrong_type_is_one_error_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "my_recipe_mod.py").write_text(MODULE)
    config = tmp_path / "gepa.toml"
    config.write_text(CONFIG.replace("minibatch = 3", 'minibatch = "3"'))
    result = cli("run", config, "--run-dir", tmp_path / "run", "--quiet")
    assert result.exit_code == 2 and result.stderr == \
        f"error: {config}: recipe: option 'minibatch' of recipe 'gepa' must be an int, got '3'\n"
    config.write_text(CONFIG.replace("minibatch = 3", "minibatch = 0"))
    result = cli("run", config, "--run-dir", tmp_path / "run", "--quiet")
    assert result.exit_code == 2 and result.stderr == "error: gepa: minibatch must be an int >= 1, got 0\n"


@pytest.mark.parametrize(("name", "options", "says"), [
    ("opro", '{ candidates = "x" }', "option 'candidates' of recipe 'opro' must be an int, got 'x'"),
    ("opro", '{ threshold = "a" }', "option 'threshold' of recipe 'opro' must be a float, got 'a'"),
    ("evoskill", "{ selection = 3 }", "option 'selection' of recipe 'evoskill' must be a str, got 3"),
])
def test_a_recipe_option_not_of_its_plain_type_is_one_problem_naming_it(tmp_path: Path, name: str, options: str,
                                                                         says: str) -> None:
    (tmp_path / "my_recipe_mod.py").write_text(MODULE)
    problems = _parse(CONFIG.replace('name = "gepa"', f'name = "{name}"').replace(
        "options = { minibatch = 3 }", f"options = {options}"), tmp_path)
    assert len(problems) == 1 and says in problems[0], problems

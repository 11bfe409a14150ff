"""examples/skill_demo.py: its progress lines and closing report read a real run's events and result correctly.

The model is a fake that follows the skill it is given; the demo itself runs the local model (see `make demo`).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentgrad.agents.skill import evolve_skill
from agentgrad.providers.base import Message
from agentgrad.providers.callable import CallableProvider
from agentgrad.runtime.budget import Budget

RULE = "Answer with only one word: positive or negative."
ROWS = [{"question": f"review {i}: {'great' if i % 2 else 'awful'} product",
         "answer": "positive" if i % 2 else "negative"} for i in range(40)]


def demo() -> ModuleType:
    path = Path(__file__).parents[2] / "examples" / "skill_demo.py"
    spec = importlib.util.spec_from_file_location("skill_demo", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def follower(messages: Sequence[Message], **params: Any) -> str:
    if messages[0].content.startswith("You write instructions"):
        return json.dumps({"rule": RULE})
    system = messages[0].content if messages[0].role == "system" else ""
    label = "positive" if "great" in messages[-1].content else "negative"
    return label if RULE in system else f"Well, I think this review is {label}, mostly."


def test_the_demo_prints_proposals_verdicts_commits_and_a_before_after_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = demo()
    result = evolve_skill(ROWS, model=CallableProvider(follower), score="normalized_exact", proposer="rule",
                          budget=Budget(rollouts=8), store=tmp_path / "run", workers=2, asynchronous=False,
                          callbacks=[module.Progress()])
    module.report(result, "", 0.0)
    out = capsys.readouterr().out
    assert "run started: " in out and f"add '- {RULE}'" in out
    assert "KEPT [accept]: significant" in out and "=> skill version 1 committed" in out
    assert f"learned skill:\n  - {RULE}" in out and "held-out accuracy" in out and ": 0.00 -> 1.00" in out
    assert "why each proposed edit was kept or not:" in out and "usage: " in out


def test_a_replacement_is_described_with_both_rules() -> None:
    op = {"action": "replace", "old": "- Answer: positive.", "new": "- Answer: positive or negative."}
    assert demo().describe(op) == "replace '- Answer: positive.' by '- Answer: positive or negative.'"

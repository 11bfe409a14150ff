"""Passengers: an op of a multi-op proposal that its origin task does not need is taken out before the gate, so a
tip riding along with a winning rule is not committed; ops that win only together both stay."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agentgrad.core.diff import Diff
from agentgrad.core.ops import Op
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import RunConfig
from agentgrad.runtime.evolve import evolve
from agentgrad.runtime.gateconfig import GateConfig
from agentgrad.runtime.trim import passengers
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from agentgrad.testing.presets import preset
from tests.runtime.helpers import events

BASE = "# s\n"


def _diff(*lines: str) -> Diff:
    return Diff("skills/s", 0, tuple(Op.add("rule", line) for line in lines), id="p1")


def _trim(diff: Diff, solves: object) -> tuple[Diff, tuple[int, ...]]:
    calls: list[tuple[str, str]] = []

    async def score(texts: tuple[str, str], task: str) -> tuple[float, float]:
        calls.append(texts)
        return float(solves(texts[0])), float(solves(texts[1]))  # type: ignore[operator]

    result = anyio.run(passengers, diff, BASE, "t1", 0.0, score)
    assert len(calls) <= len(diff.ops)  # two texts (one call each) an op at most
    return result


def test_a_tip_beside_the_rule_that_wins_is_taken_out() -> None:
    trimmed, dropped = _trim(_diff("- be concise", "- dates: use method 6"), lambda t: "method 6" in t)
    assert dropped == (0,) and [op.new for op in trimmed.ops] == ["- dates: use method 6"]
    assert trimmed.id == "p1"


def test_ops_that_win_only_together_both_stay() -> None:
    both = _diff("- dates: use method 6", "- dates exception: use method 2")
    trimmed, dropped = _trim(both, lambda t: "method 6" in t and "method 2" in t)
    assert dropped == () and trimmed == both


def test_an_op_that_wins_alone_stays_even_if_the_rest_also_wins() -> None:
    twins = _diff("- dates: use method 6", "- dates: prefer method 6")
    trimmed, dropped = _trim(twins, lambda t: "method 6" in t)
    assert dropped == () and trimmed == twins  # each alone wins the origin: not a passenger


def test_the_last_op_always_stays() -> None:
    async def noise(texts: tuple[str, str], task: str) -> tuple[float, float]:
        return 1.0, 0.0  # every op looks like a passenger: the draws of noise all went wrong

    trimmed, dropped = anyio.run(passengers, _diff("- a", "- b", "- c"), BASE, "t1", 0.0, noise)
    assert [op.new for op in trimmed.ops] == ["- c"] and dropped == (0, 1)


def _bundling(seed: int) -> tuple[WorldAgent, object]:
    world = preset("small_zipf", seed)
    clock = FakeClock()
    bot = WorldAgent(world, median=0.001, sleep=clock.sleep)
    plain = bot.propose

    async def propose(rendered: str, task: object, output: str, reward: float) -> str:
        text = await plain(rendered, task, output, reward)  # type: ignore[arg-type]
        return text + f"\ntip {bot.proposals}: be concise"  # every proposal carries a junk tip
    bot.propose = propose  # type: ignore[method-assign]
    return bot, clock


@pytest.mark.parametrize("trim", [True, False], ids=["trim", "no-trim"])
def test_a_run_whose_proposals_all_carry_a_tip_commits_the_rules_without_the_tips(tmp_path: Path,
                                                                                  trim: bool) -> None:
    bot, clock = _bundling(0)
    world = bot.world
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=world.strategy, artifact=world.artifact,
                    budget=Budget(calls=300), workers=1, asynchronous=False, store=tmp_path / "run", seed=0,
                    clock=clock.now, config=RunConfig(gate=GateConfig(trim=trim)))  # type: ignore[attr-defined]
    assert result.ok, result.error
    audit = world.audit(result.artifact.text)
    assert audit["right"] >= 4 and audit["wrong"] == 0
    trimmed = [p for _, p in events(tmp_path / "run", ["proposal"]) if "trimmed" in p]
    if trim:
        assert audit["junk"] <= 1 and trimmed and all("tip" in op["new"] for p in trimmed for op in p["trimmed"])
        assert result.counts["trimmed_ops"] == sum(len(p["trimmed"]) for p in trimmed)
    else:
        assert audit["junk"] >= 4 and not trimmed  # without it, the tips ride along with the rules

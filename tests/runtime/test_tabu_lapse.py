"""A ban for want of significance lapses once the head has moved on: on a world where one format rule serves every
category, a format rule judged before the category rules landed is tried again later and committed."""

from __future__ import annotations

from pathlib import Path

from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig
from agentgrad.runtime.evolve import evolve
from agentgrad.testing.agents import WorldAgent
from agentgrad.testing.clock import FakeClock
from agentgrad.testing.presets import preset

WORLD = preset("broad", 4)  # 79 tasks, 8 categories; 60% of all tasks also need the format rule


def final_text(tmp: Path, renew: int | None) -> str:
    clock = FakeClock()
    bot = WorldAgent(WORLD, median=0.001, sleep=clock.sleep)
    result = evolve(bot.splits(), bot.reward, agent=bot, strategy=WORLD.strategy, artifact=WORLD.artifact,
                    budget=Budget(calls=800), workers=4, asynchronous=False, store=tmp / f"run-{renew}", seed=4,
                    clock=clock.now, config=RunConfig(acceptance=Acceptance(renew=renew)))
    assert result.ok, result.error
    return result.artifact.text


def test_a_format_rule_banned_early_comes_back_once_category_rules_have_landed(tmp_path: Path) -> None:
    rule = WORLD.format_rule()
    assert rule is not None
    banned = final_text(tmp_path, None)
    assert rule not in banned  # judged once, early, where it won nothing, and never again
    for renew in (1, 3):  # tried again after the next commit (the default), or after three
        lapsing = final_text(tmp_path, renew)
        assert rule in lapsing
        assert WORLD.audit(lapsing)["wrong"] == 0 and WORLD.audit(lapsing)["junk"] == 0

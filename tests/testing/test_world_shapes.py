"""The reference world's optional shapes (issue 9): Zipf category sizes, override rules, the named presets."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from agentgrad.core.diff import apply_ops
from agentgrad.errors import ConfigError
from agentgrad.testing import ReferenceWorld, WorldConfig
from agentgrad.testing.presets import WORLDS, preset, quickstart


def _with(world: ReferenceWorld, *rules: str) -> str:
    text = world.artifact.text
    return apply_ops(text, world.strategy.ops("\n".join(rules), text))


def test_defaults_keep_equal_sizes_no_overrides_and_the_world_as_it_was() -> None:
    world = ReferenceWorld()
    assert world.config.category_sizes() == (12,) * 8
    assert dict(world.overrides) == {} and not any(t.special for t in world.tasks.values())
    assert world.tasks["t0000"].prompt == "algebra problem 2: solve the case (35, 36)"
    assert (world.train[:3], world.test[:3]) == (("t0000", "t0002", "t0005"), ("t0003", "t0004", "t0006"))
    text = world.optimal_text() + "- tip 4: be concise\n"
    everything = [sorted(world.evaluate(text, world.tasks).items()),
                  [world.propose(text, t, d).text for t in sorted(world.tasks) for d in range(3)],
                  world.train, world.val, world.test, [t.prompt for t in world.tasks.values()]]
    digest = hashlib.sha256(repr(everything).encode()).hexdigest()
    assert digest == "96883fe5dffe5e8fb8b6e8110a50a0eced8d10f332e35401b6ac6ab6d5d644a6"  # as before issue 9


def test_zipf_sizes_fall_as_one_over_rank_to_the_power_s() -> None:
    config = WorldConfig(n_categories=6, tasks_per_category=24, zipf=1.0)
    assert config.category_sizes() == (24, 12, 8, 6, 5, 4)
    world = ReferenceWorld(config)
    assert Counter(t.category for t in world.tasks.values()) == dict(zip(world.categories, (24, 12, 8, 6, 5, 4),
                                                                         strict=True))
    assert WorldConfig(n_categories=4, tasks_per_category=3, zipf=3.0).category_sizes() == (3, 1, 1, 1)


def test_an_override_alone_does_nothing_and_needs_its_category_rule() -> None:
    world = ReferenceWorld(WorldConfig(n_categories=3, tasks_per_category=20, noise=0.0, n_overrides=1,
                                       override_share=0.3))
    category = world.categories[0]
    special = {t.id for t in world.tasks.values() if t.special}
    plain = {t.id for t in world.tasks.values() if t.category == category and not t.special}
    assert len(special) == 6 and all(world.tasks[t].category == category for t in special)

    def solved(text: str) -> set[str]:
        return {t for t, s in world.evaluate(text, world.tasks).items() if s == 1.0}
    assert solved(_with(world, world.override_rule(category))) == set()
    assert solved(_with(world, world.right_rule(category))) == plain
    assert solved(_with(world, world.right_rule(category), world.override_rule(category))) == plain | special
    assert world.score(world.optimal_text(), "test") == 1.0
    wrong = f"{category} exception: use method {1 + world.overrides[category + ' exception'] % 9}"
    assert solved(_with(world, world.right_rule(category), wrong)) == plain
    assert world.audit(_with(world, world.right_rule(category), wrong, "tip 2: be concise")) == \
        {"right": 1, "wrong": 1, "junk": 1}


def test_a_special_case_proposes_its_override_once_the_category_rule_is_there() -> None:
    world = ReferenceWorld(WorldConfig(n_categories=2, tasks_per_category=20, n_overrides=1, p_right=1.0,
                                       p_junk=0.0, p_contradict=0.0, p_duplicate=0.0))
    category = world.categories[0]
    task = next(t.id for t in world.tasks.values() if t.special)
    alone = {world.propose(world.artifact.text, task, d).text for d in range(30)}
    both = f"{world.right_rule(category)}\n{world.override_rule(category)}"
    assert alone == {world.right_rule(category), world.override_rule(category), both}
    base = _with(world, world.right_rule(category))
    assert {world.propose(base, task, d).text for d in range(10)} == {world.override_rule(category)}


def test_splits_are_stratified_by_special_case_too() -> None:
    world = ReferenceWorld(WorldConfig(n_categories=2, tasks_per_category=40, n_overrides=1, override_share=0.25))
    special = [sum(world.tasks[t].special for t in ids) for ids in (world.train, world.val, world.test)]
    assert special == [5, 2, 3]  # 10 special cases split within their group, as 50/25/25 rounds


def test_the_quickstart_has_twelve_tasks_in_two_categories_split_6_3_3() -> None:
    world = quickstart()
    assert len(world.tasks) == 12 and len(world.categories) == 2
    assert (len(world.train), len(world.val), len(world.test)) == (6, 3, 3)
    assert {t.category for t in (world.tasks[i] for i in world.train)} == set(world.categories)
    assert quickstart(1).tasks != world.tasks


def test_presets_are_varied_and_valid() -> None:
    assert len(WORLDS) >= 6
    assert len({c.seed for c in WORLDS.values()}) == len(WORLDS)
    sizes = [sum(c.category_sizes()) for c in WORLDS.values()]
    assert min(sizes) == 12 and max(sizes) >= 200
    assert {c.noise for c in WORLDS.values()} >= {0.02, 0.1}
    assert any(c.n_overrides for c in WORLDS.values()) and len({c.p_right for c in WORLDS.values()}) >= 2
    with pytest.raises(ConfigError, match="unknown world"):
        preset("nope")


@pytest.mark.parametrize(("changes", "message"), [
    ({"zipf": -1.0}, "zipf must be a finite number"),
    ({"n_overrides": 9}, "n_overrides must be an int"),
    ({"override_share": 1.5}, "override_share must be a probability"),
])
def test_bad_shapes_are_refused(changes: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorldConfig(**changes)  # type: ignore[arg-type]


def test_the_format_rule_is_needed_by_its_share_of_tasks_in_every_category() -> None:
    world = ReferenceWorld(WorldConfig(n_categories=4, tasks_per_category=20, noise=0.0, base_rate=1.0,
                                       format_share=0.5, seed=3))
    needs = {t for t in world.tasks if world.needs_format(t)}
    assert 0.3 < len(needs) / len(world.tasks) < 0.7
    assert {world.tasks[t].category for t in needs} == set(world.categories)
    start, rule = world.artifact.text, world.format_rule()
    assert rule is not None
    formatted = apply_ops(start, world.strategy.ops(rule, start))
    method = int(rule.rsplit(" ", 1)[1])
    wrong = apply_ops(start, world.strategy.ops(f"format: use method {method % 9 + 1}", start))
    for task_id in world.tasks:  # every task is easy here: only the format decides
        assert world.solve(start, task_id) == (0.0 if task_id in needs else 1.0)
        assert world.solve(formatted, task_id) == 1.0
        assert world.solve(wrong, task_id) == (0.0 if task_id in needs else 1.0)
    assert world.audit(world.optimal_text()) == {"right": 5, "wrong": 0, "junk": 0}
    assert world.audit(wrong)["wrong"] == 1


def test_the_proposer_offers_the_format_rule_for_a_task_that_needs_it_until_the_skill_has_it() -> None:
    world = ReferenceWorld(WorldConfig(n_categories=4, tasks_per_category=20, format_share=0.5, p_right=1.0,
                                       p_junk=0.0, p_contradict=0.0, p_duplicate=0.0, seed=3))
    rule, start = world.format_rule(), world.artifact.text
    task_id = next(t for t in world.train if world.needs_format(t))
    offered = {world.propose(start, task_id, draw).text for draw in range(20)}
    assert rule in offered and world.right_rule(world.tasks[task_id].category) in offered
    assert rule is not None
    formatted = apply_ops(start, world.strategy.ops(rule, start))
    assert rule not in {world.propose(formatted, task_id, draw).text for draw in range(20)}
    plain = ReferenceWorld(WorldConfig(n_categories=4, tasks_per_category=20, seed=3))
    assert plain.format_rule() is None and "format" not in plain.optimal_text()

"""The reference world is deterministic under a seed and behaves as configured."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from agentgrad.core.diff import apply_ops
from agentgrad.errors import ConfigError, InvalidEvidenceError
from agentgrad.testing import ReferenceWorld, WorldConfig

WORLD = ReferenceWorld()


def test_the_same_seed_builds_the_same_world_proposals_and_scores() -> None:
    other = ReferenceWorld(WorldConfig())
    assert other.tasks == WORLD.tasks and dict(other.methods) == dict(WORLD.methods)
    assert (other.train, other.val, other.test) == (WORLD.train, WORLD.val, WORLD.test)
    text = WORLD.artifact.text + "- geometry: use method 1\n"
    assert [other.propose(text, t, 3) for t in other.train] == [WORLD.propose(text, t, 3) for t in WORLD.train]
    assert other.evaluate(text, other.val) == WORLD.evaluate(text, WORLD.val)


def test_a_different_seed_gives_a_different_world() -> None:
    other = ReferenceWorld(WorldConfig(seed=1))
    assert other.tasks != WORLD.tasks
    assert dict(other.methods) != dict(WORLD.methods)
    assert [other.propose("", t, 0) for t in sorted(other.tasks)] != [WORLD.propose("", t, 0) for t in
                                                                       sorted(WORLD.tasks)]


def test_solving_is_a_pure_function_of_text_and_task() -> None:
    text = WORLD.optimal_text()
    assert [WORLD.solve(text, t) for t in WORLD.tasks] == [WORLD.solve(text, t) for t in WORLD.tasks]


def test_tasks_have_ids_categories_and_prompts() -> None:
    assert sorted(WORLD.tasks) == [f"t{i:04d}" for i in range(96)]
    counts = Counter(task.category for task in WORLD.tasks.values())
    assert counts == dict.fromkeys(WORLD.categories, 12)
    assert all(task.prompt.startswith(task.category) for task in WORLD.tasks.values())
    assert ReferenceWorld(WorldConfig(n_categories=14)).categories[-2:] == ("cat12", "cat13")


def test_splits_are_disjoint_cover_all_tasks_and_are_stratified() -> None:
    train, val, test = set(WORLD.train), set(WORLD.val), set(WORLD.test)
    assert not (train & val or train & test or val & test)
    assert train | val | test == set(WORLD.tasks)
    for split, size in ((WORLD.train, 6), (WORLD.val, 3), (WORLD.test, 3)):
        assert Counter(WORLD.tasks[t].category for t in split) == dict.fromkeys(WORLD.categories, size)


def test_proposal_kinds_follow_the_configured_rates() -> None:
    config = WorldConfig(p_right=0.4, p_junk=0.3, p_contradict=0.1, p_duplicate=0.2)
    world = ReferenceWorld(config)
    kinds: Counter[str] = Counter(world.propose("", t, d).kind for t in world.tasks for d in range(50))
    total = sum(kinds.values())
    expected = {"right": 0.4, "junk": 0.3, "contradict": 0.1, "duplicate": 0.2}
    for kind, rate in expected.items():
        assert kinds[kind] / total == pytest.approx(rate, abs=0.03)


def test_each_kind_of_proposal_says_what_its_kind_promises() -> None:
    start = WORLD.artifact.text
    seen: set[str] = set()
    for draw in range(40):
        proposal = WORLD.propose(start, "t0005", draw)
        ops = WORLD.strategy.ops(proposal.text, start)
        assert proposal.category == WORLD.tasks["t0005"].category
        seen.add(proposal.kind)
        if proposal.kind in ("right", "duplicate"):  # nothing present yet: a duplicate repeats the right rule
            assert [WORLD.is_right(op) for op in ops] == [True]
        elif proposal.kind == "junk":
            assert [WORLD.is_junk(op) for op in ops] == [True]
        else:
            assert [WORLD.is_contradictory(op) for op in ops] == [True]
    assert seen == {"right", "junk", "contradict", "duplicate"}


def test_a_duplicate_repeats_a_rule_already_in_the_text_and_yields_no_ops() -> None:
    text = WORLD.artifact.text + "- tip 3: be concise\n- dates: use method 1\n"
    duplicates = [p for t in WORLD.train for d in range(10) if (p := WORLD.propose(text, t, d)).kind == "duplicate"]
    assert duplicates
    assert {p.text for p in duplicates} <= {"tip 3: be concise", "dates: use method 1"}
    assert all(WORLD.strategy.ops(p.text, text) == () for p in duplicates)


def test_the_optimal_text_scores_about_one_minus_noise() -> None:
    world = ReferenceWorld(WorldConfig(tasks_per_category=100, noise=0.1))
    mean = sum(world.evaluate(world.optimal_text(), world.tasks).values()) / len(world.tasks)
    assert mean == pytest.approx(0.9, abs=0.03)
    assert WORLD.score(WORLD.optimal_text(), "test") > 0.8


def test_the_noise_averaged_score_sees_the_rules_and_not_the_texts_own_noise_draw() -> None:
    world = ReferenceWorld(WorldConfig(tasks_per_category=30, noise=0.1, base_rate=0.0))
    optimal = world.optimal_text()
    padded = optimal + "- tip 1: be concise\n"  # a junk line: the same rules, a fresh draw of noise
    assert world.score(optimal, "test") != world.score(padded, "test")
    assert world.expected_score(optimal, "test") == world.expected_score(padded, "test") == pytest.approx(0.9)
    assert world.expected_score(world.artifact.text, "test") == pytest.approx(0.1)


def test_the_empty_skill_scores_about_base_rate_plus_noise() -> None:
    world = ReferenceWorld(WorldConfig(tasks_per_category=100, noise=0.05, base_rate=0.2))
    mean = sum(world.evaluate(world.artifact.text, world.tasks).values()) / len(world.tasks)
    assert mean == pytest.approx(0.2 * 0.95 + 0.8 * 0.05, abs=0.03)


def test_a_contradictory_rule_blocks_its_category_even_with_noise() -> None:
    world = ReferenceWorld(WorldConfig(noise=0.3, base_rate=0.5))
    category = world.categories[0]
    wrong = 1 + world.methods[category] % world.config.n_methods
    text = apply_ops(world.optimal_text(), world.strategy.ops(f"{category}: use method {wrong}", world.optimal_text()))
    scores = world.evaluate(text, [t.id for t in world.tasks.values() if t.category == category])
    assert set(scores.values()) == {0.0}


def test_junk_changes_no_outcome_without_noise() -> None:
    world = ReferenceWorld(WorldConfig(noise=0.0, base_rate=0.3))
    for start in (world.artifact.text, world.optimal_text()):
        junk = next(p for d in range(50) if (p := world.propose(start, "t0000", d)).kind == "junk")
        ops = world.strategy.ops(junk.text, start)
        assert all(world.is_junk(op) for op in ops)
        assert world.evaluate(apply_ops(start, ops), world.tasks) == world.evaluate(start, world.tasks)


def test_noise_is_redrawn_for_every_distinct_text() -> None:
    world = ReferenceWorld(WorldConfig(tasks_per_category=50, noise=0.2))
    start = world.artifact.text
    scores = [world.evaluate(start + f"- tip {n}: be concise\n", world.tasks) for n in range(2)]
    assert scores[0] != scores[1]
    assert sum(scores[0].values()) / len(world.tasks) == pytest.approx(0.2, abs=0.04)


def test_without_noise_the_right_rule_solves_exactly_its_category() -> None:
    world = ReferenceWorld(WorldConfig(noise=0.0))
    category = world.categories[2]
    text = apply_ops(world.artifact.text, world.strategy.ops(world.right_rule(category), world.artifact.text))
    solved = {t for t, s in world.evaluate(text, world.tasks).items() if s == 1.0}
    assert solved == {t.id for t in world.tasks.values() if t.category == category}


def test_a_free_text_skill_appends_rules_and_the_solver_follows_each_categorys_last_line() -> None:
    world = ReferenceWorld(WorldConfig(noise=0.0, free_text=True))
    category = world.categories[1]
    wrong = f"{category}: use method {1 + world.methods[category] % world.config.n_methods}"
    ids = [t.id for t in world.tasks.values() if t.category == category]
    right = apply_ops(world.artifact.text, world.strategy.ops(world.right_rule(category), world.artifact.text))
    both = apply_ops(right, world.strategy.ops(wrong, right))
    assert both.count(f"- {category}:") == 2  # appended next to the old line, not in its place
    assert set(world.evaluate(right, ids).values()) == {1.0} and set(world.evaluate(both, ids).values()) == {0.0}
    fixed = apply_ops(both, world.strategy.ops(world.right_rule(category), both))
    assert fixed == both  # the right rule is there already: AppendRules adds nothing, and the wrong line still rules
    assert world.audit(both) == {"right": 1, "wrong": 1, "junk": 0}
    (op,) = world.strategy.ops(wrong, right)
    assert world.is_contradictory(op) and not world.is_right(op)
    assert world.evaluate(world.optimal_text(), world.tasks) == ReferenceWorld(WorldConfig(noise=0.0)).evaluate(
        ReferenceWorld(WorldConfig(noise=0.0)).optimal_text(), world.tasks)


def test_a_bundling_proposer_adds_a_junk_tip_to_its_share_of_proposals_and_nothing_else() -> None:
    plain, bundling = ReferenceWorld(WorldConfig()), ReferenceWorld(WorldConfig(p_bundle=0.5))
    text = plain.artifact.text
    said = [(plain.propose(text, t, d).text, bundling.propose(text, t, d).text) for t in plain.train for d in range(4)]
    with_tip = [b for a, b in said if a != b]
    assert all(b.startswith(a + "\ntip ") for a, b in said if a != b)
    assert 0.35 < len(with_tip) / len(said) < 0.65
    ops = [op for b in with_tip for op in bundling.strategy.ops(b, text)]
    assert any(bundling.is_junk(op) for op in ops) and any(bundling.is_right(op) for op in ops)


def test_unknown_tasks_and_splits_are_refused() -> None:
    with pytest.raises(InvalidEvidenceError, match="t9999"):
        WORLD.solve("", "t9999")
    with pytest.raises(ValueError, match="unknown split"):
        WORLD.score("", "holdout")


@pytest.mark.parametrize(("changes", "message"), [
    ({"noise": 1.5}, "noise must be a probability"),
    ({"base_rate": -0.1}, "base_rate must be a probability"),
    ({"p_right": 0.6}, "must sum to 1"),
    ({"train": 0.6, "val": 0.3, "test": 0.3}, "must sum to 1"),
    ({"n_categories": 0}, "n_categories must be an int >= 1"),
    ({"tasks_per_category": 2.5}, "tasks_per_category must be an int"),
    ({"n_methods": 1}, "n_methods must be an int >= 2"),
    ({"seed": True}, "seed must be an int"),
    ({"p_junk": "0.2"}, "p_junk must be a probability"),
    ({"free_text": 1}, "free_text must be a bool"),
    ({"flaky_share": 1.2}, "flaky_share must be a probability"),
])
def test_bad_configs_are_refused_with_the_field_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorldConfig(**changes)


def test_config_round_trips_through_its_dict() -> None:
    config = WorldConfig(seed=7, noise=0.1)
    assert WorldConfig(**config.to_dict()) == config


def test_a_rule_that_reaches_part_of_its_category_solves_that_share_and_nothing_else() -> None:
    full = ReferenceWorld(WorldConfig(noise=0.0, tasks_per_category=40))
    part = ReferenceWorld(WorldConfig(noise=0.0, tasks_per_category=40, rule_reach=0.6))
    category = part.categories[1]
    text = apply_ops(part.artifact.text, part.strategy.ops(part.right_rule(category), part.artifact.text))
    mine = {t.id for t in part.tasks.values() if t.category == category}
    solved = {t for t, s in part.evaluate(text, part.tasks).items() if s == 1.0}
    assert solved < mine and 0.45 < len(solved) / len(mine) < 0.75  # about 60%, the same tasks every time
    assert {t for t, s in full.evaluate(text, full.tasks).items() if s == 1.0} == mine
    assert part.expected_score(part.optimal_text(), "test") < full.expected_score(full.optimal_text(), "test")
    with pytest.raises(ConfigError, match="rule_reach"):
        WorldConfig(rule_reach=0.0)


def test_flaky_tasks_flip_at_their_own_rate_and_the_rest_at_the_worlds() -> None:
    world = ReferenceWorld(WorldConfig(tasks_per_category=60, noise=0.02, base_rate=0.0, flaky_share=0.25,
                                       flaky_noise=0.4))
    flaky = {t for t in world.tasks if world.noise_of(t) == 0.4}
    steady = set(world.tasks) - flaky
    assert 0.18 < len(flaky) / len(world.tasks) < 0.32
    assert {world.noise_of(t) for t in steady} == {0.02}
    texts = [world.artifact.text + f"- tip {n}: be concise\n" for n in range(40)]  # junk: only the flips differ
    flips = {t: sum(world.solve(text, t) for text in texts) / len(texts) for t in world.tasks}
    assert sum(flips[t] for t in flaky) / len(flaky) == pytest.approx(0.4, abs=0.05)
    assert sum(flips[t] for t in steady) / len(steady) == pytest.approx(0.02, abs=0.01)
    assert world.expected_score(world.artifact.text, "test") == pytest.approx(
        sum(world.noise_of(t) for t in world.test) / len(world.test))
    uniform = ReferenceWorld(WorldConfig(tasks_per_category=60, noise=0.02, base_rate=0.0))
    assert uniform.evaluate(texts[0], uniform.tasks) != world.evaluate(texts[0], world.tasks)
    assert ReferenceWorld(WorldConfig(tasks_per_category=60, noise=0.02, base_rate=0.0, flaky_share=0.0,
                                      flaky_noise=0.4)).evaluate(texts[0], uniform.tasks) == \
        uniform.evaluate(texts[0], uniform.tasks)

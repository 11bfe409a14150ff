"""Named reference worlds for the small, skewed, noisy regime (issue 9): from a 12-task quickstart to a few hundred
tasks, with Zipf-like category sizes, answer noise, override rules, rules that reach part of their category, and
proposers of varied quality.

`WORLDS` maps a name to its `WorldConfig`; `preset(name, seed)` builds it with the seed shifted by `seed` (so a
benchmark can repeat a world's shape over several independent draws). `quickstart()` is the 12-task world
(2 categories of 8 and 4 tasks, split 6/3/3).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from agentgrad.errors import ConfigError
from agentgrad.testing.world import ReferenceWorld, WorldConfig

WORLDS = MappingProxyType({
    # 12 tasks: categories of 8 and 4, split 6/3/3
    "quickstart": WorldConfig(n_categories=2, tasks_per_category=8, zipf=1.0, noise=0.02, seed=11),
    # 29 tasks over 6 categories (12, 6, 4, 3, 2, 2), some easy tasks
    "small_zipf": WorldConfig(n_categories=6, tasks_per_category=12, zipf=1.0, noise=0.05, base_rate=0.15,
                              seed=21),
    # 110 tasks over 10 categories, steeply skewed (48 ... 2)
    "steep_zipf": WorldConfig(n_categories=10, tasks_per_category=48, zipf=1.3, noise=0.03, seed=31),
    # 84 tasks; the two largest categories have a special case needing the category rule and an override
    "overrides": WorldConfig(n_categories=6, tasks_per_category=30, zipf=0.8, noise=0.03, n_overrides=2,
                             override_share=0.3, seed=41),
    # 86 tasks, 10% of answers flip with every edit
    "noisy": WorldConfig(n_categories=8, tasks_per_category=24, zipf=0.7, noise=0.10, seed=51),
    # 54 tasks, a proposer that is right only 30% of the time (25% contradictions)
    "poor_proposer": WorldConfig(n_categories=8, tasks_per_category=20, zipf=1.0, noise=0.05, seed=61,
                                 p_right=0.3, p_junk=0.3, p_contradict=0.25, p_duplicate=0.15),
    # 79 tasks over 8 categories, 30% of them easy; 60% of all tasks also need one format rule, whose effect
    # reaches every category
    "broad": WorldConfig(n_categories=8, tasks_per_category=24, zipf=0.8, noise=0.05, base_rate=0.3,
                         format_share=0.6, seed=81),
    # 78 tasks over 8 categories; a right rule solves only 60% of its category's tasks (drawn per task), as a
    # model that a rule helps on some inputs only: the rest stay failed, and rollouts there propose it again
    "partial": WorldConfig(n_categories=8, tasks_per_category=24, zipf=0.8, noise=0.05, base_rate=0.1,
                           rule_reach=0.6, seed=91),
    # 224 tasks over 12 categories (80 ... 5), one override, easy tasks, 20% contradictions
    "large": WorldConfig(n_categories=12, tasks_per_category=80, zipf=1.1, noise=0.05, base_rate=0.15,
                         n_overrides=1, seed=71, p_right=0.45, p_junk=0.2, p_contradict=0.2, p_duplicate=0.15),
})


def preset(name: str, seed: int = 0) -> ReferenceWorld:
    """The named world, with its seed shifted by 1000 × `seed` (0: the world as listed)."""
    try:
        config = WORLDS[name]
    except KeyError:
        raise ConfigError(f"unknown world {name!r}; expected one of {sorted(WORLDS)}") from None
    return ReferenceWorld(replace(config, seed=config.seed + 1000 * seed))


def quickstart(seed: int = 0) -> ReferenceWorld:
    """The 12-task world: 2 categories of 8 and 4 tasks, split 6/3/3."""
    return preset("quickstart", seed)

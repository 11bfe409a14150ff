"""The drawn worlds: reproducible, varied, and inside the small-data regime."""

from __future__ import annotations

import pytest

from agentgrad.errors import ConfigError
from agentgrad.testing.drawn import DEV, HELD_OUT, call_budget, drawn, name, parse
from agentgrad.testing.world import ReferenceWorld


def test_the_same_index_and_family_give_the_same_world_and_families_differ() -> None:
    assert drawn(3) == drawn(3, HELD_OUT)
    assert [drawn(i, DEV) for i in range(5)] != [drawn(i, HELD_OUT) for i in range(5)]


def test_drawn_worlds_stay_in_the_small_skewed_noisy_regime_and_vary() -> None:
    configs = [drawn(i) for i in range(60)]
    sizes = [sum(c.category_sizes()) for c in configs]
    assert all(12 <= s <= 320 for s in sizes)
    assert min(sizes) < 40 and max(sizes) > 150
    assert len({c.noise for c in configs}) >= 4 and len({c.zipf for c in configs}) >= 4
    assert any(c.n_overrides for c in configs) and any(not c.n_overrides for c in configs)
    for config in configs[:10]:
        world = ReferenceWorld(config)
        assert world.score(world.optimal_text(), "test") > world.score(world.artifact.text, "test") or \
            config.base_rate > 0
    assert all(120 <= call_budget(c) <= 1500 for c in configs)


def test_names_round_trip_and_a_negative_index_is_refused() -> None:
    assert parse(name(12)) == 12 and parse("small_zipf") is None and parse("drawnx") is None
    with pytest.raises(ConfigError, match="0 or more"):
        drawn(-1)

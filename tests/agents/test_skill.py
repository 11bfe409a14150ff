"""evolve_skill: rows in, a better skill out, with a model that follows the skill it is given."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentgrad.agents.edits import RULE_SCHEMA
from agentgrad.agents.skill import _concurrency, default_model, evolve_skill, make_agent, resolve_model, scoring
from agentgrad.data.task import Task
from agentgrad.errors import ConfigError, RewardError
from agentgrad.providers.base import Completion, Message, Usage
from agentgrad.providers.callable import CallableProvider
from agentgrad.providers.errors import AuthError
from agentgrad.providers.middleware.base import layers
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Workers
from tests.providers.fake_server import FakeServer

RULE = "Reply with exactly one lowercase word: positive or negative."
ROWS = [{"question": f"review {i}: {'great' if i % 2 else 'awful'} product", "answer":
         "positive" if i % 2 else "negative"} for i in range(40)]


def obedient(messages: Sequence[Message], **params: Any) -> str:
    """Answers the label only when the skill says how; proposes that rule when asked to reflect."""
    last = messages[-1].content
    if "Reply with JSON only" in last:
        return json.dumps({"edits": [{"action": "add", "content": RULE}]})
    system = messages[0].content if messages[0].role == "system" else ""
    label = "positive" if "great" in last else "negative"
    return label if RULE.lower() in system.lower() else f"I would say the sentiment is {label}."


def test_evolve_skill_learns_the_rule_and_improves_held_out_accuracy(tmp_path: Path) -> None:
    result = evolve_skill(ROWS, model=CallableProvider(obedient), score="exact", budget=Budget(rollouts=12),
                          store=tmp_path / "run", workers=2, asynchronous=False)
    assert result.ok, result.error
    assert RULE in result.artifact.text
    assert result.baseline_test_reward == 0.0 and result.test_reward == 1.0


def test_scoring_refuses_tasks_without_gold() -> None:
    with pytest.raises(RewardError, match="no gold"):
        scoring("exact")(Task("t", "q"), "a")


def test_unknown_model_names_are_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown model"):
        resolve_model("gpt-5")


def test_default_model_prefers_a_configured_hosted_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "AGENTGRAD_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert default_model() == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert default_model().startswith("anthropic:")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert default_model().startswith("openai:")


def test_every_model_call_of_the_run_is_charged_including_reflection(tmp_path: Path) -> None:
    def metered(messages: Sequence[Message], **params: Any) -> Completion:
        return Completion(obedient(messages, **params), Usage(5, 1, 0.0), 0.0, "m")

    result = evolve_skill(ROWS, model=CallableProvider(metered), score="exact", budget=Budget(rollouts=12),
                          store=tmp_path / "run", workers=2, asynchronous=False)
    assert result.ok, result.error
    usage = result.usage
    assert usage.proposals > 0
    assert usage.test_evals > 0  # held-out calls spend tokens too, and are charged
    assert usage.tokens == 6 * (usage.rollouts + usage.gate_evals + usage.proposals + usage.test_evals)


def test_named_models_are_priced_limited_broken_retried_and_latched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    kinds = [type(layer).__name__ for layer in layers(resolve_model("openai:gpt-4o-mini", concurrency=3))]
    assert kinds == ["FatalLatch", "Retry", "CircuitBreaker", "ConcurrencyLimit", "Accounting", "OpenAICompatible"]


def small(messages: Sequence[Message], **params: Any) -> str:
    """Like `obedient`, but proposes through the one-rule scaffold."""
    if messages[0].content.startswith("You write instructions"):
        return json.dumps({"rule": RULE})
    return obedient(messages, **params)


def test_a_local_model_proposes_through_the_one_rule_scaffold_seeded_and_constrained() -> None:
    agent = make_agent(CallableProvider(small), local=True, seed=3)
    assert (agent.style, agent.seed, agent.reflect_params["json_schema"]) == ("rule", 3, RULE_SCHEMA)
    hosted = make_agent(CallableProvider(small), local=False)
    assert (hosted.style, hosted.seed) == ("edits", None) and "json_schema" not in hosted.reflect_params


def test_evolve_skill_with_the_rule_proposer_learns_the_rule(tmp_path: Path) -> None:
    result = evolve_skill(ROWS, model=CallableProvider(small), score="exact", budget=Budget(rollouts=12),
                          store=tmp_path / "run", workers=2, asynchronous=False, proposer="rule")
    assert result.ok, result.error
    assert result.artifact.text.strip() == f"- {RULE}"
    assert result.baseline_test_reward == 0.0 and result.test_reward == 1.0


def test_a_named_model_gets_as_many_parallel_calls_as_the_workers_make() -> None:
    assert _concurrency({"workers": Workers(rollout=2, propose=2, gate=1, slots=3)}) == 5
    assert _concurrency({"workers": 40}) == 16
    assert _concurrency({}) == Workers().run_slots + Workers().propose


def test_a_provider_passed_in_is_left_open(tmp_path: Path) -> None:
    class Closable(CallableProvider):
        closed = False

        def close(self) -> None:
            self.closed = True

    provider = Closable(obedient)
    evolve_skill(ROWS, model=provider, score="exact", budget=Budget(rollouts=4), store=tmp_path / "run",
                 workers=1, asynchronous=False)
    assert not provider.closed


def test_a_bad_key_stops_a_16_worker_run_after_one_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer().start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        result = evolve_skill(ROWS, model="openai:err-401", score="exact", budget=Budget(rollouts=40),
                              store=tmp_path / "run", workers=16)
        assert isinstance(result.error, AuthError), result.error  # the run stopped on it, not a silent "ok"
        assert server.url in str(result.error)  # the message names the endpoint
        assert server.counts["err-401"] == 1  # every other slot learned it from the latch, with no request
        assert result.usage.rollouts <= 16  # it stopped at once: no slot started a second call
    finally:
        server.stop()

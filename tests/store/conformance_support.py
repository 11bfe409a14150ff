"""What the `Store` conformance suite is built from: the backend's hooks, known-failure marks, and test data.

A backend runs the suite by subclassing `conformance.StoreConformance` in a ``test_*.py`` module and providing
two fixtures on the subclass:

- ``store_factory``: a `StoreFactory`, ``(path) -> Store``, opening (creating if new) the store of the run
  directory `path`. It must be picklable (a module-level function, or a `functools.partial` of one): the
  multi-process tests send it to processes started with the 'spawn' method, each of which opens its own store.
  Inject a fixed clock: the suite never reads the time.
- ``damage_storage``: a `Damage`, ``(path) -> None``, that damages the closed store of `path` the way a crash,
  a full disk or a stray write would (the suite then expects a typed error on opening or reading it).

Promises a backend is known to break are listed in the subclass's ``known_failures`` (test name -> a mark from
`known_failure`): the test still runs and must fail, as an expected failure, until the backend is fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentgrad.core.artifact import Artifact, Kind, Layer, Version
from agentgrad.core.decision import Decision, Outcome
from agentgrad.core.diff import Diff
from agentgrad.core.evidence import Evidence
from agentgrad.core.ops import Op
from agentgrad.store.protocol import Store

StoreFactory = Callable[[Path], Store]
"""Opens (creating if new) the store of one run directory."""

Damage = Callable[[Path], None]
"""Damages the (closed) store of one run directory."""

SKILL = "skills/style"
HARNESS = "harness/loop"
SAFETY = "safety/rules"
SKILL_TEXT = "# Style\n- be brief\n"
HARNESS_TEXT = "# Loop\n- retry twice\n"
SAFETY_TEXT = "# Safety\n- never delete user data\n"


def known_failure(reason: str, *, raises: type[BaseException] | tuple[type[BaseException], ...] | None = None
                  ) -> pytest.MarkDecorator:
    """The mark for a promise the backend breaks today: a strict expected failure (an unexpected pass fails)."""
    return pytest.mark.xfail(strict=True, reason=reason, raises=raises)


class ConformanceBase:
    """Applies the subclass's ``known_failures`` marks to the tests they name (parametrised ones included)."""

    known_failures: ClassVar[Mapping[str, pytest.MarkDecorator]] = {}

    @pytest.fixture(autouse=True)
    def _mark_known_failures(self, request: pytest.FixtureRequest) -> None:
        mark = self.known_failures.get(getattr(request.node, "originalname", request.node.name))
        if mark is not None:
            request.applymarker(mark)

    @pytest.fixture
    def run_dir(self, tmp_path: Path) -> Path:
        """Where the test's store lives."""
        return tmp_path / "run"

    @pytest.fixture
    def store(self, store_factory: StoreFactory, run_dir: Path) -> Iterator[Store]:
        """A new store holding the `seed` artifacts, closed after the test."""
        with store_factory(run_dir) as opened:
            seed(opened)
            yield opened


class Tick:
    """A deterministic clock for stores: 1000.0, 1001.0, ... (never the wall time)."""

    def __init__(self) -> None:
        self.now = 999.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def evidence(delta: float = 0.5) -> Evidence:
    """Paired evidence on two tasks, the candidate ahead by `delta` on the first."""
    return Evidence.paired({"t1": 0.5, "t2": 0.5}, {"t1": 0.5 + delta, "t2": 0.5 + delta / 2})


def accept(diff: Diff, **numbers: float) -> Decision:
    """The ACCEPTED decision about `diff`."""
    return Decision(diff.id, diff.artifact_id, Outcome.ACCEPTED, "accept", "it helped", {"p": 0.99, **numbers})


def verdict(diff: Diff, outcome: Outcome, reason: str = "it did not help") -> Decision:
    """A decision with another outcome about `diff`."""
    return Decision(diff.id, diff.artifact_id, outcome, "judge", reason, {"p": 0.2})


def rule(artifact_id: str, base: int, text: str, *, author: str = "w1") -> Diff:
    """A diff adding the rule line ``- text`` to `artifact_id` at version `base`."""
    return Diff(artifact_id, base, (Op.add("rule", f"- {text}"),), author=author, rationale=f"add {text}")


def item(diff: Diff) -> tuple[Diff, Evidence, Decision]:
    """`diff` with evidence and its ACCEPTED decision, as `commit_many` takes it."""
    return diff, evidence(), accept(diff)


def seed(store: Store) -> None:
    """Add the suite's three artifacts: an L2 skill, an L1 harness and an L0 (frozen) safety text."""
    store.add_artifact(Artifact(SKILL, Kind.SKILL, SKILL_TEXT))
    store.add_artifact(Artifact(HARNESS, Kind.HARNESS, HARNESS_TEXT))
    store.add_artifact(Artifact(SAFETY, Kind.PROMPT, SAFETY_TEXT, Layer.L0))


def observable(store: Store) -> tuple[Any, ...]:
    """Everything a reader can see of the store: both branches' heads, every history, every decision."""
    histories: dict[str, list[Version]] = {a: store.history(a) for a in store.artifact_ids()}
    return store.heads("dev"), store.heads("stable"), histories, store.decisions()

"""`WholeText`: the proposal is the whole new text of the artifact."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentgrad.core.ops import Action
from agentgrad.core.units import Scope
from agentgrad.strategies.base import Edit, UnitStrategy


@dataclass(frozen=True)
class WholeText(UnitStrategy):
    """One unit, the whole text: a proposal becomes one replace (an add when the artifact is empty).

    A proposal equal to the current text gives no ops. Structured edits: ``{"action": "replace", "content":
    text}`` (or "add", the same thing) and ``{"action": "delete"}``, which empties the artifact.
    Two ops contradict when they leave different texts.
    """

    scope: ClassVar[Scope] = Scope.TEXT
    name: ClassVar[str] = "whole_text"

    def _free_text(self, text: str) -> list[Edit]:
        return [Edit(Action.ADD, text)]

    def _target_key(self, target: str) -> str:
        return ""

"""How a proposal becomes diff ops: append rules, keyed rules, markdown sections or the whole text."""

from agentgrad.strategies.base import DEFAULT_MAX_CHARS, Edit, RawProposal, Strategy, UnitStrategy, make_diff
from agentgrad.strategies.keyed import KeyedRules, entries
from agentgrad.strategies.rules import AppendRules, negates, polarity
from agentgrad.strategies.sections import Sections
from agentgrad.strategies.whole import WholeText

__all__ = [
    "DEFAULT_MAX_CHARS", "AppendRules", "Edit", "KeyedRules", "RawProposal", "Sections", "Strategy", "UnitStrategy",
    "WholeText", "entries", "make_diff", "negates", "polarity",
]

"""How a proposal becomes diff ops: append rules, keyed rules, demonstrations, markdown sections or the whole text."""

from agentgrad.strategies.base import (
    DEFAULT_MAX_CHARS,
    Edit,
    RawProposal,
    Rendered,
    Strategy,
    UnitStrategy,
    make_diff,
)
from agentgrad.strategies.demos import Demonstrations, Example, demo_from_failure, examples, propose_demo
from agentgrad.strategies.keyed import KeyedRules, entries
from agentgrad.strategies.library import LibraryStrategy
from agentgrad.strategies.rules import AppendRules, negates, polarity
from agentgrad.strategies.sections import Sections
from agentgrad.strategies.whole import WholeText

__all__ = [
    "DEFAULT_MAX_CHARS", "AppendRules", "Demonstrations", "Edit", "Example", "KeyedRules", "LibraryStrategy",
    "RawProposal", "Rendered", "Sections", "Strategy", "UnitStrategy", "WholeText", "demo_from_failure", "entries",
    "examples", "make_diff", "negates", "polarity", "propose_demo",
]

"""An LLM as a scorer: any ``complete(prompt) -> reply`` function, a rubric, and a strict reading of the reply.

The judge is asked to end with ``Score: X``, X from 0 to `scale`. `parse_score` reads, in this order:
the last ``score``/``rating``/``grade`` label followed by a number, else a last line that is just a number.
A number followed by ``%`` is read as a percentage, ``X/N`` or ``X out of N`` as X divided by N; a bare number is
divided by the judge's `scale` (1 by default, so a 0-10 judge needs ``scale=10``, or to say ``8/10``).
A reply with no such score, or a score outside [0, 1] once scaled, raises `JudgeError`: never a silent 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentgrad.core._checks import number, text
from agentgrad.data.errors import JudgeError
from agentgrad.errors import ConfigError

_VALUE = r"(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+))"
_UNIT = r"\s*(?P<unit>%|/\s*(?P<den>\d+(?:\.\d+)?)|out\s+of\s+(?P<den2>\d+(?:\.\d+)?))?"
_LABELLED = re.compile(r"\b(?:score|rating|grade)\b\W{0,3}?(?:is|of|=|:)?[\s*_`]*" + _VALUE + _UNIT + r"(?![\w.])",
                       re.IGNORECASE)
_BARE = re.compile(r"[^\w+\-.]*" + _VALUE + _UNIT + r"[^\w]*", re.IGNORECASE)


def _scaled(match: re.Match[str], scale: float, reply: str) -> float:
    value = float(match["value"])
    denominator = match["den"] or match["den2"]
    if match["unit"] == "%":
        result = value / 100
    elif denominator is not None:
        if float(denominator) <= 0:
            raise JudgeError(f"judge gave a score over {denominator}: {reply!r:.300}")
        result = value / float(denominator)
    else:
        result = value / scale
    if not math.isfinite(result) or not 0.0 <= result <= 1.0:
        raise JudgeError(f"judge score {match.group(0).strip()!r} is outside the range 0-{scale:g}: {reply!r:.300}")
    return result


def parse_score(reply: str, *, scale: float = 1.0) -> float:
    """The score in a judge's reply, in [0, 1]; raises `JudgeError` quoting the reply if there is none.

    >>> parse_score("Mostly right.\\nScore: 8/10")
    0.8
    """
    text(reply, "the judge's reply", empty=True, error=JudgeError)
    labelled = list(_LABELLED.finditer(reply))
    if labelled:
        return _scaled(labelled[-1], scale, reply)
    lines = [line for line in reply.splitlines() if line.strip()]
    bare = _BARE.fullmatch(lines[-1].strip()) if lines else None
    if bare is None:
        raise JudgeError(f"judge reply holds no score (expected 'Score: X' with X from 0 to {scale:g}): {reply!r:.300}")
    return _scaled(bare, scale, reply)


@dataclass(frozen=True)
class Judge:
    """A scorer that asks an LLM. Build it with `llm_judge`.

    Args:
        complete: sends a prompt and returns the model's reply (synchronous; its errors propagate).
        rubric: what a good answer is, in words.
        scale: the top of the judge's score range (1 or 10, say).
    """

    complete: Callable[[str], str]
    rubric: str
    scale: float = 1.0

    def prompt(self, output: str, expected: Any) -> str:
        """The text sent to the judge for one output."""
        reference = "" if expected is None else f"Reference answer:\n{expected}\n\n"
        return (
            "You are grading an answer against a rubric.\n\n"
            f"Rubric:\n{self.rubric}\n\n{reference}Answer to grade:\n{output}\n\n"
            f"Think briefly if you need to, then end with one line 'Score: X', where X is a number from 0 "
            f"(wrong) to {self.scale:g} (fully meets the rubric)."
        )

    def __call__(self, output: str, expected: Any) -> float:
        return parse_score(self.complete(self.prompt(output, expected)), scale=self.scale)


def llm_judge(complete: Callable[[str], str], *, rubric: str, scale: float = 1.0) -> Judge:
    """A scorer that asks `complete` to grade each output against `rubric` (and the gold, when there is one).

    >>> judge = llm_judge(lambda prompt: "Score: 0.5", rubric="Is it polite?")
    >>> judge("Thanks!", None)
    0.5
    """
    if not callable(complete):
        raise ConfigError(f"llm_judge needs a callable complete(prompt) -> str, got {type(complete).__name__}")
    text(rubric, "llm_judge rubric", strip=True)
    return Judge(complete, rubric, number(scale, "llm_judge scale", above=0))

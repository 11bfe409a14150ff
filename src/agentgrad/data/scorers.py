"""Scorers: compare an agent's output with the gold answer and give a number in [0, 1] (1 is right).

A scorer is any callable ``(output: str, expected) -> float``. Every built-in accepts, as `expected`, either one
gold value or a list (tuple, set) of acceptable answers, and then gives the best score over them; a gold value
that is not a string is compared through ``str()``. A task without gold (None) is a `DataError`.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from typing import Any, Literal, Protocol

from agentgrad.core._checks import is_number, number, one_of
from agentgrad.data.errors import DataError
from agentgrad.errors import ConfigError, InvalidEvidenceError


class Scorer(Protocol):
    """How well `output` matches `expected`: a float in [0, 1]."""

    def __call__(self, output: str, expected: Any) -> float: ...


def _alternatives(output: object, expected: Any) -> list[Any]:
    if not isinstance(output, str):
        raise DataError(f"a scorer needs the output as a string, got {type(output).__name__}")
    if expected is None:
        raise DataError("this scorer needs a gold answer, but the task has none (expected is None)")
    if isinstance(expected, (list, tuple, set, frozenset)):
        if not expected:
            raise DataError("expected is an empty list of acceptable answers")
        return list(expected)
    return [expected]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _clean(text: str) -> str:
    """NFKC, case-folded, white space collapsed to single spaces."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


_WRAPPERS = "\"'`*_“”‘’«»„"
_PAIRS = ("()", "[]", "{}")


def normalize(text: str) -> str:
    """The form `normalized_exact` compares: case-folded, white space collapsed, and unwrapped.

    Unwrapping repeats until nothing changes: surrounding quotes, backticks and markdown ``*``/``_``; a bracket
    pair around the whole text; leading ``,;:!?``; trailing ``.,;:!?``. A leading ``-``, ``+``, ``.`` or ``$``
    stays (it changes a number's meaning).

    >>> normalize('  "Positive." ')
    'positive'
    """
    text = _clean(text)
    previous = None
    while text != previous:
        previous = text
        text = text.strip().strip(_WRAPPERS).lstrip(",;:!?").rstrip(".,;:!?").strip()
        if len(text) >= 2 and text[0] + text[-1] in _PAIRS:
            text = text[1:-1]
    return text


def exact(output: str, expected: Any) -> float:
    """1.0 if `output` equals the gold text character for character (white space included), else 0.0."""
    return max(float(output == _text(e)) for e in _alternatives(output, expected))


def normalized_exact(output: str, expected: Any) -> float:
    """1.0 if `output` equals the gold after `normalize` on both (case, spaces, quotes, final period)."""
    alternatives = _alternatives(output, expected)
    got = normalize(output)
    return max(float(got == normalize(_text(e))) for e in alternatives)


def _contains_one(haystack: str, answer: str) -> float:
    needle = normalize(answer)
    if not needle:
        return float(normalize(haystack) == "")
    pattern = re.escape(needle)
    if needle[0].isalnum() or needle[0] == "_":
        pattern = r"(?<!\w)" + pattern
    if needle[-1].isalnum() or needle[-1] == "_":
        pattern += r"(?!\w)"
    return float(re.search(pattern, _clean(haystack)) is not None)


def contains(output: str, expected: Any) -> float:
    """1.0 if the normalized gold occurs in the output as whole words (case-insensitive), else 0.0.

    ``"4"`` is not found in ``"14"``, nor ``"cat"`` in ``"category"``; an empty gold matches only an empty output.
    Beware of negation: ``"not positive"`` contains ``"positive"``.
    """
    return max(_contains_one(output, _text(e)) for e in _alternatives(output, expected))


_NUMBER = re.compile(
    r"(?<![\w.,/-])(?P<sign>[-+\u2212]?)"
    r"(?:(?P<num>\d+)/(?P<den>\d+)"
    r"|(?P<dec>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?![\w/]|[.,]\d)"
)


def numbers_in(text: str) -> list[float]:
    """The numbers in `text`, in order, as `numeric` reads them.

    Read: ``-3``, ``+2``, ``1,234.5`` (commas between groups of three), ``.5``, ``1e3``, ``2/4`` (a fraction,
    0.5), ``$12`` and ``50%`` (the sign is ignored: 12 and 50). Skipped: chains such as ``5/3/2021``, digits glued
    to letters (``5th``, ``10km``), ``1,2,3``, and the parts of ``2021-03-05`` after the first.

    >>> numbers_in("It costs $1,234.50, not 2/4 of it.")
    [1234.5, 0.5]
    """
    found: list[float] = []
    for match in _NUMBER.finditer(unicodedata.normalize("NFKC", text)):
        sign = -1.0 if match["sign"] in ("-", "\u2212") else 1.0
        if match["num"] is not None:
            denominator = int(match["den"])
            if denominator == 0:
                continue
            found.append(sign * int(match["num"]) / denominator)
        else:
            value = float(match.group(0).lstrip("-+\u2212").replace(",", ""))
            if math.isfinite(value):
                found.append(sign * value)
    return found


def _gold_number(value: Any) -> float:
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        found = numbers_in(value.strip())
        if len(found) == 1:
            return found[0]
    raise DataError(f"numeric scorer: the gold answer {value!r:.80} is not one finite number")


def numeric(output: str, expected: Any, *, tolerance: float = 1e-6, pick: Literal["first", "last"] = "last") -> float:
    """1.0 if the number in the output is within `tolerance` (absolute) of the gold number, else 0.0.

    Args:
        output: free text; its numbers are read by `numbers_in`. No number scores 0.0.
        expected: a number or a string holding exactly one number.
        tolerance: the largest accepted absolute difference (default 1e-6).
        pick: which number of the output counts, the ``"last"`` (default, where models put answers) or ``"first"``.
    Use ``functools.partial(numeric, tolerance=0.01)`` for a looser scorer.
    """
    number(tolerance, "numeric tolerance", low=0)
    one_of(pick, "numeric pick", ("first", "last"))
    golds = [_gold_number(e) for e in _alternatives(output, expected)]
    found = numbers_in(output)
    if not found:
        return 0.0
    got = found[0] if pick == "first" else found[-1]
    return max(float(abs(got - gold) <= tolerance) for gold in golds)


def _squad_tokens(text: str) -> list[str]:
    lowered = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return [t for t in lowered.split() if t not in ("a", "an", "the")]


def _f1_one(output: str, answer: str) -> float:
    got, gold = _squad_tokens(output), _squad_tokens(answer)
    if not got or not gold:
        return float(got == gold)
    same = sum((Counter(got) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(got), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1(output: str, expected: Any) -> float:
    """Token F1 as in SQuAD: lower-case, punctuation and the articles a/an/the removed, bag-of-words overlap.

    Two texts with no tokens left score 1.0; one empty and one not score 0.0.
    """
    return max(_f1_one(output, _text(e)) for e in _alternatives(output, expected))


def get_scorer(name_or_callable: str | Scorer) -> Scorer:
    """The built-in scorer with this name, or the callable itself.

    Names: ``exact``, ``normalized_exact``, ``contains``, ``numeric``, ``f1``.
    """
    if callable(name_or_callable):
        return name_or_callable
    scorers: dict[str, Scorer] = {
        "exact": exact, "normalized_exact": normalized_exact, "contains": contains, "numeric": numeric, "f1": f1,
    }
    if not isinstance(name_or_callable, str) or name_or_callable not in scorers:
        raise ConfigError(f"unknown scorer {name_or_callable!r}; choose one of {sorted(scorers)} or pass a callable")
    return scorers[name_or_callable]


def checked(scorer: Scorer) -> Scorer:
    """Wrap `scorer` so that a result that is not a number in [0, 1] (NaN, 1.5, True, "1") raises.

    The error is `InvalidEvidenceError` and names the value; a good result is returned as a float.
    """
    name = getattr(scorer, "__name__", type(scorer).__name__)

    def checked_scorer(output: str, expected: Any) -> float:
        return number(scorer(output, expected), f"the result of scorer {name!r}", low=0.0, high=1.0,
                      error=InvalidEvidenceError)

    checked_scorer.__name__ = f"checked_{name}"
    return checked_scorer


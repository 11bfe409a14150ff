"""Argument checks: one call per guard, raising a typed error that says what was expected and what was got.

Every raising helper takes the argument's `name` as it should read in the message and the `error` class to raise
(`ConfigError` unless told), and returns the checked value. The message is always
``"{name} must be {expected}, got {value!r}"`` (the value cut to 80 characters; `text` shows a wrong value's type
instead, as a string's content may be long or private). `is_integer` and `is_number` are the same tests as
predicates, for guards that raise one message about several values.

`bool` is an `int` to Python but never a count or a number here: ``True`` is refused by `integer`, `number` and
`probability`, and only `flag` accepts it.

>>> integer(4, "Workers.rollout", low=1)
4
>>> number(0.5, "llm_judge scale", above=0)
0.5
>>> integer(True, "Workers.rollout", low=1)
Traceback (most recent call last):
...
agentgrad.errors.ConfigError: Workers.rollout must be an int >= 1, got True
>>> number(float("nan"), "numeric tolerance", low=0)
Traceback (most recent call last):
...
agentgrad.errors.ConfigError: numeric tolerance must be a finite number >= 0, got nan
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Any, TypeGuard, TypeVar

from agentgrad.errors import ConfigError

T = TypeVar("T")
E = TypeVar("E", bound=Enum)

SHOWN = 80  # characters of a refused value's repr that a message shows


def _got(value: object) -> str:
    return f"{value!r:.{SHOWN}}"


def _bound(value: float) -> str:
    return str(int(value)) if isinstance(value, int) or value.is_integer() else repr(value)


def _interval(low: float | None, high: float | None, above: float | None, below: float | None) -> str:
    """The bounds as words: ``" >= 1"``, ``" > 0"``, ``" in [0, 1]"``, ``" in (0, 0.5)"`` or ``""``."""
    lower = f"[{_bound(low)}" if low is not None else f"({_bound(above)}" if above is not None else ""
    upper = f"{_bound(high)}]" if high is not None else f"{_bound(below)})" if below is not None else ""
    if lower and upper:
        return f" in {lower}, {upper}"
    if lower:
        return f" {'>=' if low is not None else '>'} {lower[1:]}"
    if upper:
        return f" {'<=' if high is not None else '<'} {upper[:-1]}"
    return ""


def is_integer(value: object, *, low: int | None = None, high: int | None = None) -> TypeGuard[int]:
    """True if `value` is an `int` (not a `bool`) in ``[low, high]`` (a missing bound does not limit)."""
    return (isinstance(value, int) and not isinstance(value, bool)
            and (low is None or value >= low) and (high is None or value <= high))


def is_number(value: object, *, low: float | None = None, high: float | None = None, above: float | None = None,
              below: float | None = None, finite: bool = True) -> TypeGuard[float]:
    """True if `value` is an `int` or `float` (not a `bool`) within the bounds, and finite unless `finite=False`.

    `low` and `high` are inclusive bounds, `above` and `below` exclusive ones (give at most one of each pair).
    NaN never passes a bound, so with `finite=False` only a check without bounds lets NaN through.
    """
    if (low is not None and above is not None) or (high is not None and below is not None):
        raise TypeError("give low or above, and high or below, not both")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if finite and isinstance(value, float) and not math.isfinite(value):
        return False
    return ((low is None or value >= low) and (high is None or value <= high)
            and (above is None or value > above) and (below is None or value < below))


def integer(value: object, name: str, *, low: int | None = None, high: int | None = None,
            error: type[Exception] = ConfigError) -> int:
    """`value` if it is an `int` (not a `bool`) in ``[low, high]``; else raises `error`.

    >>> integer(9, "WorldConfig.n_overrides", low=0, high=8)
    Traceback (most recent call last):
    ...
    agentgrad.errors.ConfigError: WorldConfig.n_overrides must be an int in [0, 8], got 9
    """
    if is_integer(value, low=low, high=high):
        return value
    raise error(f"{name} must be an int{_interval(low, high, None, None)}, got {_got(value)}")


def number(value: object, name: str, *, low: float | None = None, high: float | None = None,
           above: float | None = None, below: float | None = None, finite: bool = True,
           error: type[Exception] = ConfigError) -> float:
    """`value` as a `float` if it passes `is_number` with these bounds; else raises `error`.

    >>> number(1.5, "the result of scorer 'exact'", low=0, high=1)
    Traceback (most recent call last):
    ...
    agentgrad.errors.ConfigError: the result of scorer 'exact' must be a number in [0, 1], got 1.5
    """
    if is_number(value, low=low, high=high, above=above, below=below, finite=finite):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            pass
    bounds = _interval(low, high, above, below)
    kind = "a finite number" if finite and not bounds.startswith(" in ") else "a number"
    raise error(f"{name} must be {kind}{bounds}, got {_got(value)}")


def probability(value: object, name: str, *, error: type[Exception] = ConfigError) -> float:
    """`value` as a `float` if it is a number in [0, 1] (not a `bool`, not NaN); else raises `error`."""
    if is_number(value, low=0.0, high=1.0):
        return float(value)
    raise error(f"{name} must be a probability in [0, 1], got {_got(value)}")


def flag(value: object, name: str, *, error: type[Exception] = ConfigError) -> bool:
    """`value` if it is a real `bool` (``0``, ``1`` and ``"yes"`` are refused); else raises `error`."""
    if isinstance(value, bool):
        return value
    raise error(f"{name} must be True or False, got {_got(value)}")


def text(value: object, name: str, *, empty: bool = False, strip: bool = False,
         error: type[Exception] = ConfigError) -> str:
    """`value` if it is a `str`, non-empty unless `empty=True` (with `strip=True`, not only whitespace either).

    A value that is not a string is shown by its type name; a refused empty string by its repr.

    >>> text(3, "artifact 'a': text", empty=True)
    Traceback (most recent call last):
    ...
    agentgrad.errors.ConfigError: artifact 'a': text must be a string, got int
    """
    if not isinstance(value, str):
        kind = "a string" if empty else "a non-blank string" if strip else "a non-empty string"
        raise error(f"{name} must be {kind}, got {type(value).__name__}")
    if not empty and not (value.strip() if strip else value):
        raise error(f"{name} must be a {'non-blank' if strip else 'non-empty'} string, got {_got(value)}")
    return value


def one_of(value: object, name: str, choices: Sequence[T], *, error: type[Exception] = ConfigError) -> T:
    """The choice equal to `value`; else raises `error` listing the choices (in their order).

    >>> one_of("middle", "numeric pick", ("first", "last"))
    Traceback (most recent call last):
    ...
    agentgrad.errors.ConfigError: numeric pick must be 'first' or 'last', got 'middle'
    """
    for choice in choices:
        if choice == value:
            return choice
    raise error(f"{name} must be {_either(choices)}, got {_got(value)}")


def _either(choices: Sequence[object]) -> str:
    shown = [repr(c) for c in choices]
    return " or ".join(shown) if len(shown) <= 2 else f"one of {', '.join(shown)}"


def member(value: object, name: str, kind: type[E], *, error: type[Exception] = ConfigError) -> E:
    """The member of the enum `kind` that `value` is or names (``Kind.SKILL`` or ``"skill"``); else raises `error`
    listing the values it takes.

    >>> from agentgrad.core.artifact import Layer
    >>> member("L9", "artifact 'a': layer", Layer)
    Traceback (most recent call last):
    ...
    agentgrad.errors.ConfigError: artifact 'a': layer must be one of 'L0', 'L1', 'L2', got 'L9'
    """
    try:
        return kind(value)
    except (ValueError, TypeError):  # TypeError: an unhashable value
        raise error(f"{name} must be {_either([m.value for m in kind])}, got {_got(value)}") from None


def items(value: object, name: str, kind: type[T] | tuple[type[T], ...], *,
          error: type[Exception] = ConfigError) -> tuple[T, ...]:
    """`value` as a tuple if it is an iterable (not a string or a mapping) of `kind` values; else raises `error`
    saying what it is, or which item is not a `kind`.

    >>> items(None, "Diff.ops", int)
    Traceback (most recent call last):
    ...
    agentgrad.errors.ConfigError: Diff.ops must be a sequence of int values, got NoneType
    """
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise error(f"{name} must be a sequence of {names} values, got {type(value).__name__}")
    out = tuple(value)
    for index, item in enumerate(out):
        if not isinstance(item, kind):
            raise error(f"{name} must hold only {names} values, got {type(item).__name__} at index {index}")
    return out


def function(value: object, name: str, *, error: type[Exception] = ConfigError) -> Callable[..., Any]:
    """`value` if it is callable; else raises `error` naming its type."""
    if callable(value):
        return value
    raise error(f"{name} must be a function, got {type(value).__name__}")

"""Generators of the shipped `arithmetic` and `dates` sets: pure functions of a seed, so the files can be rebuilt.

``python -m agentgrad.data.generate DIR`` writes ``arithmetic.jsonl`` and ``dates.jsonl`` into DIR.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SEED = 20240601
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def arithmetic_rows(n: int = 60, *, seed: int = SEED) -> list[dict[str, Any]]:
    """`n` distinct questions ``What is A op B?``, two-digit A and B, op cycling through +, - and ×, shuffled."""
    rng = random.Random(seed)
    ops: dict[str, Callable[[int, int], int]] = {
        "+": lambda a, b: a + b, "-": lambda a, b: a - b, "×": lambda a, b: a * b,
    }
    symbols = [list(ops)[k % 3] for k in range(n)]
    rng.shuffle(symbols)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, str, int]] = set()
    for k, op in enumerate(symbols):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        while (a, op, b) in seen:
            a, b = rng.randint(10, 99), rng.randint(10, 99)
        seen.add((a, op, b))
        rows.append({"id": f"arith-{k:03d}", "question": f"What is {a} {op} {b}?", "answer": ops[op](a, b),
                     "op": op})
    return rows


def ordinal(day: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``..."""
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def render_date(day: dt.date, style: str) -> str:
    """`day` written in one of the shipped styles (see `DATE_STYLES`); numeric styles say their order."""
    month = MONTHS[day.month - 1]
    forms = {
        "month_day_year": f"{month} {day.day}, {day.year}",
        "day_month_year": f"{day.day} {month} {day.year}",
        "ordinal": f"{ordinal(day.day)} of {month} {day.year}",
        "abbreviated": f"{month[:3]} {day.day}, {day.year}",
        "weekday": f"{WEEKDAYS[day.weekday()]}, {month} {day.day}, {day.year}",
        "slash_day_first": f"{day.day:02d}/{day.month:02d}/{day.year} (day first)",
        "slash_month_first": f"{day.month:02d}/{day.day:02d}/{day.year} (month first)",
        "dotted_day_first": f"{day.day}.{day.month}.{day.year} (day.month.year)",
        "compact": f"{day.year}{day.month:02d}{day.day:02d} (YYYYMMDD)",
        "year_first_slash": f"{day.year}/{day.month:02d}/{day.day:02d} (year/month/day)",
    }
    return forms[style]


DATE_STYLES = ("month_day_year", "day_month_year", "ordinal", "abbreviated", "weekday", "slash_day_first",
               "slash_month_first", "dotted_day_first", "compact", "year_first_slash")


def _pick_date(rng: random.Random, style: str) -> dt.date:
    year, month = rng.randint(1985, 2030), rng.randint(1, 12)
    if style == "ordinal":  # the suffixes people get wrong
        return dt.date(year, month, rng.choice((1, 2, 3, 11, 12, 13, 21, 22, 23)))
    if style in ("slash_day_first", "slash_month_first", "dotted_day_first"):  # ambiguous without the note
        return dt.date(year, month, rng.choice([d for d in range(1, 13) if d != month]))
    start, end = dt.date(1985, 1, 1).toordinal(), dt.date(2030, 12, 31).toordinal()
    return dt.date.fromordinal(rng.randint(start, end))


def date_rows(per_style: int = 6, *, seed: int = SEED) -> list[dict[str, Any]]:
    """`per_style` distinct dates in each of the `DATE_STYLES`, shuffled, with the ISO 8601 answer ``YYYY-MM-DD``."""
    rng = random.Random(seed)
    plan = [style for style in DATE_STYLES for _ in range(per_style)]
    rng.shuffle(plan)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[dt.date, str]] = set()
    for index, style in enumerate(plan):
        day = _pick_date(rng, style)
        while (day, style) in seen:
            day = _pick_date(rng, style)
        seen.add((day, style))
        rows.append({"id": f"date-{index:03d}", "question": f"Write this date as YYYY-MM-DD: {render_date(day, style)}",
                     "answer": day.isoformat(), "format": style})
    return rows


def to_jsonl(rows: list[dict[str, Any]]) -> str:
    """One JSON object per line, keys in insertion order, non-ASCII kept, a final newline."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main(argv: list[str]) -> int:
    """Write the generated sets into the folder given as the only argument."""
    if len(argv) != 1:
        print("usage: python -m agentgrad.data.generate DIR", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    (folder / "arithmetic.jsonl").write_text(to_jsonl(arithmetic_rows()), encoding="utf-8")
    (folder / "dates.jsonl").write_text(to_jsonl(date_rows()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

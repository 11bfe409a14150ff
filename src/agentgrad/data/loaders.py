"""Read dataset rows (a list of dicts) from JSON Lines, CSV and Parquet files.

Every loader gives a clear `DataError` for a missing or empty file and for a malformed line (with its number).
Parquet needs the optional `pyarrow` package (``pip install 'agentgrad[parquet]'``).
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from agentgrad.data.errors import DataError, DataUnavailableError, MissingDependencyError

PathLike = str | os.PathLike[str]


def optional_module(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import an optional package, or raise `MissingDependencyError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{purpose} needs the optional package {module.split('.')[0]!r}: pip install 'agentgrad[{extra}]'"
        ) from exc


def _existing_file(path: PathLike) -> Path:
    file = Path(path)
    if not file.exists():
        raise DataUnavailableError(f"data file {str(file)!r} does not exist")
    if not file.is_file():
        raise DataUnavailableError(f"data path {str(file)!r} is not a file")
    return file


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{str(file)!r} is not UTF-8 text (bad byte at offset {exc.start})") from exc


def parse_jsonl(text: str, *, source: str = "<text>") -> list[dict[str, Any]]:
    """Parse JSON Lines: one JSON object per line, blank lines skipped.

    Args:
        text: the whole content.
        source: what to call it in error messages (a file name).
    """
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{source}, line {number}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(value, dict):
            raise DataError(f"{source}, line {number}: expected a JSON object, got {type(value).__name__}")
        rows.append(value)
    if not rows:
        raise DataError(f"{source} holds no rows")
    return rows


def load_jsonl(path: PathLike) -> list[dict[str, Any]]:
    """Rows of a JSON Lines file (UTF-8, one object per line)."""
    file = _existing_file(path)
    return parse_jsonl(_read_text(file), source=repr(str(file)))


def load_csv(path: PathLike) -> list[dict[str, Any]]:
    """Rows of a CSV file with a header line; every value is a string.

    A line with more or fewer fields than the header is a `DataError` naming its line number.
    """
    file = _existing_file(path)
    reader = csv.DictReader(io.StringIO(_read_text(file), newline=""), strict=True)
    rows: list[dict[str, Any]] = []
    try:
        for row in reader:
            if None in row or any(value is None for value in row.values()):
                raise DataError(f"{str(file)!r}, line {reader.line_num}: {len(reader.fieldnames or [])} fields "
                                "expected (as in the header), found a different number")
            rows.append(dict(row))
    except csv.Error as exc:
        raise DataError(f"{str(file)!r}, line {reader.line_num}: malformed CSV ({exc})") from exc
    if not rows:
        raise DataError(f"{str(file)!r} holds no rows (a header alone, or nothing)")
    return rows


def load_parquet(path: PathLike) -> list[dict[str, Any]]:
    """Rows of a Parquet file (needs ``pip install 'agentgrad[parquet]'``)."""
    parquet = optional_module("pyarrow.parquet", extra="parquet", purpose="load_parquet")
    file = _existing_file(path)
    try:
        table = parquet.read_table(file)
    except (OSError, ValueError) as exc:
        raise DataError(f"{str(file)!r} is not a readable Parquet file: {exc}") from exc
    rows: list[dict[str, Any]] = table.to_pylist()
    if not rows:
        raise DataError(f"{str(file)!r} holds no rows")
    return rows

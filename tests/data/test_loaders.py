"""File loaders on real files: rows come back as written; missing, empty and malformed files are clear errors."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from agentgrad.data import (
    DataError,
    DataUnavailableError,
    MissingDependencyError,
    load_csv,
    load_jsonl,
    load_parquet,
    parse_jsonl,
    tasks_from_rows,
)
from agentgrad.data.loaders import optional_module

ROWS = [{"question": "Größe?", "answer": 3, "tags": ["a", "b"]}, {"question": "x, \"y\"", "answer": None, "tags": []}]


def test_jsonl_round_trips_rows_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(ROWS[0], ensure_ascii=False) + "\n\n   \n" + json.dumps(ROWS[1]) + "\n", "utf-8")
    assert load_jsonl(path) == ROWS
    assert load_jsonl(str(path)) == ROWS


def test_jsonl_bad_line_names_the_line_number(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": \n', "utf-8")
    with pytest.raises(DataError, match="line 3: not valid JSON"):
        load_jsonl(path)


def test_jsonl_line_that_is_not_an_object_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text('{"a": 1}\n[1, 2]\n', "utf-8")
    with pytest.raises(DataError, match="line 2: expected a JSON object, got list"):
        load_jsonl(path)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_empty_jsonl_is_an_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, "utf-8")
    with pytest.raises(DataError, match="no rows"):
        load_jsonl(path)


@pytest.mark.parametrize("loader", [load_jsonl, load_csv])
def test_missing_file_is_data_unavailable(tmp_path: Path, loader: object) -> None:
    with pytest.raises(DataUnavailableError, match="does not exist"):
        loader(tmp_path / "nope.txt")  # type: ignore[operator]


def test_a_folder_is_not_a_data_file(tmp_path: Path) -> None:
    with pytest.raises(DataUnavailableError, match="not a file"):
        load_jsonl(tmp_path)


def test_non_utf8_file_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes('{"q": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        load_jsonl(path)


def test_parse_jsonl_names_its_source() -> None:
    with pytest.raises(DataError, match="my-source, line 1"):
        parse_jsonl("nope", source="my-source")


def test_csv_reads_header_rows_quotes_and_newlines(tmp_path: Path) -> None:
    path = tmp_path / "set.csv"
    path.write_text('\ufeffquestion,answer\n"Is it ""good""?",yes\n"two\nlines",no\n', "utf-8")
    rows = load_csv(path)
    assert rows == [{"question": 'Is it "good"?', "answer": "yes"}, {"question": "two\nlines", "answer": "no"}]
    assert [t.expected for t in tasks_from_rows(rows)] == ["yes", "no"]


@pytest.mark.parametrize(("content", "pattern"), [
    ("q,a\n1,2\n3,4,5\n", "line 3"),
    ("q,a\n1,2\n3\n", "line 3"),
    ("q,a\n", "no rows"),
    ("", "no rows"),
])
def test_csv_malformed_or_empty_is_an_error(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content, "utf-8")
    with pytest.raises(DataError, match=pattern):
        load_csv(path)


def test_optional_module_names_the_extra_to_install() -> None:
    with pytest.raises(MissingDependencyError, match=r"pip install 'agentgrad\[demo\]'"):
        optional_module("agentgrad_no_such_package_xyz.sub", extra="demo", purpose="a test loader")


needs_pyarrow = pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                                   reason="pyarrow is not installed (pip install 'agentgrad[parquet]')")


@needs_pyarrow
def test_parquet_round_trips_rows(tmp_path: Path) -> None:
    pa = optional_module("pyarrow", extra="parquet", purpose="test")
    pq = optional_module("pyarrow.parquet", extra="parquet", purpose="test")
    path = tmp_path / "set.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert load_parquet(path) == ROWS


@needs_pyarrow
def test_parquet_empty_missing_and_corrupt_files_are_errors(tmp_path: Path) -> None:
    pa = optional_module("pyarrow", extra="parquet", purpose="test")
    pq = optional_module("pyarrow.parquet", extra="parquet", purpose="test")
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"q": pa.array([], pa.string())}), empty)
    with pytest.raises(DataError, match="no rows"):
        load_parquet(empty)
    with pytest.raises(DataUnavailableError):
        load_parquet(tmp_path / "missing.parquet")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_text("this is not parquet", "utf-8")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        load_parquet(corrupt)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is not None, reason="pyarrow is installed")
def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError, match=r"agentgrad\[parquet\]"):
        load_parquet(tmp_path / "x.parquet")

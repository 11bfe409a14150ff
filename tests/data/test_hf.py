"""`load_hf` on data made here: saved datasets, local files and folders, a local cache; offline only."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from agentgrad.data import DataError, DataUnavailableError, MissingDependencyError, load_hf
from agentgrad.data.hf import OFFLINE_VARIABLES, offline_env
from agentgrad.errors import ConfigError

HAVE_DATASETS = importlib.util.find_spec("datasets") is not None
ROWS = [{"question": "one?", "answer": 1}, {"question": "two?", "answer": 2}]


@pytest.fixture
def datasets() -> ModuleType:
    if not HAVE_DATASETS:
        pytest.skip("the 'datasets' package is not installed (pip install 'agentgrad[hf]')")
    with offline_env():  # the first import must see offline mode, as it would inside load_hf
        return importlib.import_module("datasets")


def test_offline_env_sets_and_restores_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    with offline_env():
        assert [os.environ[name] for name in OFFLINE_VARIABLES] == ["1", "1"]
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert "HF_DATASETS_OFFLINE" not in os.environ


def test_offline_env_restores_variables_after_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(RuntimeError), offline_env():
        raise RuntimeError("boom")
    assert "HF_HUB_OFFLINE" not in os.environ


@pytest.mark.skipif(HAVE_DATASETS, reason="datasets is installed")
def test_load_hf_without_datasets_names_the_extra(tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError, match=r"agentgrad\[hf\]"):
        load_hf(tmp_path, split="train")


def test_saved_dataset_loads(datasets: ModuleType, tmp_path: Path) -> None:
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "saved"))
    assert load_hf(tmp_path / "saved", split="train") == ROWS


def test_saved_dataset_dict_picks_the_split(datasets: ModuleType, tmp_path: Path) -> None:
    parts = {"train": datasets.Dataset.from_list(ROWS), "test": datasets.Dataset.from_list(ROWS[:1])}
    datasets.DatasetDict(parts).save_to_disk(str(tmp_path / "saved"))
    assert load_hf(str(tmp_path / "saved"), split="test") == ROWS[:1]
    with pytest.raises(DataError, match=r"no split 'validation'; it has \['test', 'train'\]"):
        load_hf(tmp_path / "saved", split="validation")
    with pytest.raises(ConfigError, match="save_to_disk"):
        load_hf(tmp_path / "saved", split="test", config="main")


def test_local_jsonl_file_loads_as_the_named_split(datasets: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    assert load_hf(path, split="validation", cache_dir=tmp_path / "cache") == ROWS


def test_local_folder_of_split_files_loads_one_split(datasets: ModuleType, tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "train.jsonl").write_text(json.dumps(ROWS[0]) + "\n", "utf-8")
    (folder / "test.jsonl").write_text(json.dumps(ROWS[1]) + "\n", "utf-8")
    assert load_hf(folder, split="test", cache_dir=tmp_path / "cache") == ROWS[1:]
    with pytest.raises(DataError, match="split 'dev'"):
        load_hf(folder, split="dev", cache_dir=tmp_path / "cache")


def test_hub_name_not_in_cache_is_a_clear_offline_error(datasets: ModuleType, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(DataUnavailableError) as info:
        load_hf("agentgrad-tests/no-such-set", split="train", cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "'agentgrad-tests/no-such-set'" in message and "offline" in message
    assert "HF_HUB_OFFLINE" not in os.environ


def test_missing_local_path_is_a_clear_error(datasets: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(DataUnavailableError, match="no such file or folder"):
        load_hf(str(tmp_path / "nope" / "set.jsonl"), split="train")


def test_empty_selection_is_a_data_error(datasets: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    assert load_hf(path, split="train[:1]", cache_dir=tmp_path / "cache") == ROWS[:1]
    with pytest.raises(DataError, match=r"no rows|no data"):
        load_hf(path, split="train[:0]", cache_dir=tmp_path / "cache")


def test_unreadable_saved_dataset_is_a_data_error_not_a_traceback(datasets: ModuleType, tmp_path: Path) -> None:
    datasets.Dataset.from_dict({"question": []}).save_to_disk(str(tmp_path / "empty"))
    with pytest.raises(DataError, match="empty"):
        load_hf(tmp_path / "empty", split="train")


def test_bad_split_argument_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="split"):
        load_hf(tmp_path, split="")


def test_hub_name_in_the_local_cache_loads_offline(datasets: ModuleType, tmp_path: Path) -> None:
    """Lays out the cache the way `datasets` leaves it after a download, then asks for the hub name."""
    source = tmp_path / "tiny.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    datasets.load_dataset("json", data_files={"train": str(source)}, split="train", cache_dir=str(tmp_path / "b"))
    built = sorted(p for p in (tmp_path / "b" / "json").glob("*/*/*") if p.is_dir())
    if len(built) != 1 or not (built[0] / "json-train.arrow").exists():
        pytest.skip(f"this datasets version lays out its cache differently: {built}")
    target = tmp_path / "cache" / "agentgrad-tests___tiny" / "default" / "0.0.0" / built[0].name
    shutil.copytree(built[0], target)
    (target / "json-train.arrow").rename(target / "tiny-train.arrow")
    assert load_hf("agentgrad-tests/tiny", split="train", cache_dir=tmp_path / "cache") == ROWS


def test_local_file_of_unknown_format_is_a_data_error(datasets: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "set.xml"
    path.write_text("<rows/>", "utf-8")
    with pytest.raises(DataError, match=r"cannot tell the format.*'\.jsonl'"):
        load_hf(path, split="train")

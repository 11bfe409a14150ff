"""Load one split of a Hugging Face dataset from a local path or the local cache, never from the network.

Needs the optional `datasets` package (``pip install 'agentgrad[hf]'``). For the duration of a call the
environment has ``HF_HUB_OFFLINE=1`` and ``HF_DATASETS_OFFLINE=1``; the previous values are restored after.
`datasets` reads these when it is first imported, so a hub name is only looked up when the library is in offline
mode (import it after agentgrad's first `load_hf` call, or set ``HF_HUB_OFFLINE=1`` yourself); local paths
always work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from agentgrad.data.errors import DataError, DataUnavailableError
from agentgrad.data.loaders import PathLike, optional_module
from agentgrad.errors import ConfigError

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


@contextmanager
def offline_env() -> Iterator[None]:
    """Set the Hugging Face offline variables to ``1`` inside the block and restore them after it.

    It changes the process environment, so do not run it concurrently with code that reads those variables.
    """
    saved = {name: os.environ.get(name) for name in OFFLINE_VARIABLES}
    os.environ.update({name: "1" for name in OFFLINE_VARIABLES})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _looks_like_path(name: str) -> bool:
    file_suffixes = (".json", ".jsonl", ".csv", ".parquet", ".txt", ".arrow")
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or name.endswith(file_suffixes) or "\\" in name


def _builder_for(file: Path) -> str:
    builders = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}
    builder = builders.get(file.suffix.lower())
    if builder is None:
        raise DataError(f"cannot tell the format of {str(file)!r}; use a file ending in one of {sorted(builders)}")
    return builder


def _pick_split(dataset: Any, split: str, where: str) -> Any:
    if hasattr(dataset, "keys"):  # a DatasetDict
        if split not in dataset:
            raise DataError(f"{where} has no split {split!r}; it has {sorted(dataset.keys())}")
        return dataset[split]
    saved = getattr(dataset, "split", None)
    if saved is not None and str(saved) != split:
        raise DataError(f"{where} holds the split {str(saved)!r}, not {split!r}")
    return dataset


def _call(datasets: ModuleType, what: str, load: Callable[[], Any], split: str, *, remote: bool = False) -> Any:
    """Run a `datasets` load, turning its errors into agentgrad errors that say what was looked for."""
    exceptions = getattr(datasets, "exceptions", None)
    library_error: type[Exception] = getattr(exceptions, "DatasetsError", OSError)
    try:
        return load()
    except (ConnectionError, FileNotFoundError) as exc:
        if not remote:
            raise DataUnavailableError(f"{what} could not be read: {type(exc).__name__}: {exc}") from exc
        raise DataUnavailableError(
            f"{what} is not available offline: it is not a local dataset and not in the local Hugging Face cache, "
            f"and this machine is offline (HF_HUB_OFFLINE=1), so nothing was downloaded. Download it where there "
            f"is network, or pass a local path. ({type(exc).__name__}: {exc})"
        ) from exc
    except (OSError, ValueError, LookupError, library_error) as exc:
        raise DataError(f"could not load split {split!r} of {what}: {type(exc).__name__}: {exc}") from exc


def _load(datasets: ModuleType, name: str, split: str, config: str | None, cache_dir: str | None) -> Any:
    path = Path(name).expanduser()
    load_dataset = datasets.load_dataset
    if path.is_dir() and ((path / "dataset_dict.json").exists() or (path / "state.json").exists()):
        if config is not None:
            raise ConfigError(f"config {config!r} does not apply to {name!r}, a dataset saved with save_to_disk")
        saved = _call(datasets, f"the saved dataset {name!r}", lambda: datasets.load_from_disk(str(path)), split)
        return _pick_split(saved, split, f"the saved dataset {name!r}")
    if path.is_file():
        builder = _builder_for(path)
        return _call(datasets, f"the data file {name!r}", lambda: load_dataset(
            builder, data_files={split.split("[")[0]: str(path)}, split=split, cache_dir=cache_dir), split)
    if path.is_dir():
        return _call(datasets, f"the local dataset folder {name!r}", lambda: load_dataset(
            str(path), name=config, split=split, cache_dir=cache_dir), split)
    if _looks_like_path(name):
        raise DataUnavailableError(f"no such file or folder: {name!r}")
    cache = cache_dir or str(datasets.config.HF_DATASETS_CACHE)
    what = f"the Hugging Face dataset {name!r} (config {config!r}, split {split!r}; cache {cache!r})"
    if not datasets.config.HF_HUB_OFFLINE:
        raise DataUnavailableError(
            f"{what} was not looked up: the datasets library was imported before with offline mode off, so the "
            "lookup could reach the network. Set HF_HUB_OFFLINE=1 before importing datasets, or pass a local path."
        )
    return _call(datasets, what, lambda: load_dataset(name, name=config, split=split, cache_dir=cache_dir), split,
                 remote=True)


def load_hf(name_or_path: PathLike, *, split: str, config: str | None = None,
            cache_dir: PathLike | None = None) -> list[dict[str, Any]]:
    """Rows of one split of a Hugging Face dataset, offline only.

    Args:
        name_or_path: a folder written by ``save_to_disk``, a local data file (.json, .jsonl, .csv, .parquet,
            .txt), a local dataset folder of data files, or a hub name (``"owner/name"``) already in the cache.
        split: the split to read, e.g. ``"train"`` (a saved single `Dataset` without a split name accepts any).
        config: the dataset configuration (hub names and dataset folders only).
        cache_dir: the datasets cache to read and build in (default: the library's).
    Raises `DataUnavailableError` when the data is not on this machine, `DataError` for a bad split or file.
    """
    if not isinstance(split, str) or not split:
        raise ConfigError(f"split must be a non-empty string such as 'train', got {split!r}")
    with offline_env():
        datasets = optional_module("datasets", extra="hf", purpose="load_hf")
        dataset = _load(datasets, os.fspath(name_or_path), split, config,
                        None if cache_dir is None else os.fspath(cache_dir))
        rows: list[dict[str, Any]] = dataset.to_list()
    if not rows:
        raise DataError(f"split {split!r} of {os.fspath(name_or_path)!r} holds no rows")
    return rows

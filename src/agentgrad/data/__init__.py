"""The data layer: tasks, loaders, deterministic splits, scorers and a few small shipped task sets.

>>> from agentgrad.data import load_set, split, get_scorer, recommended_scorer
>>> parts = split(load_set("arithmetic"), seed=0)
>>> score = get_scorer(recommended_scorer("arithmetic"))
>>> score("The answer is 85.", 85)
1.0
"""

from agentgrad.data.errors import DataError, DataUnavailableError, JudgeError, MissingDependencyError
from agentgrad.data.hf import load_hf
from agentgrad.data.judge import Judge, llm_judge, parse_score
from agentgrad.data.loaders import load_csv, load_jsonl, load_parquet, parse_jsonl
from agentgrad.data.scorers import (
    Scorer,
    checked,
    contains,
    exact,
    f1,
    get_scorer,
    normalize,
    normalized_exact,
    numbers_in,
    numeric,
)
from agentgrad.data.shipped import available_sets, load_set, recommended_scorer
from agentgrad.data.splits import Splits, split
from agentgrad.data.task import Task, check_task_id, check_unique, tasks_from_rows

__all__ = [
    "DataError", "DataUnavailableError", "Judge", "JudgeError", "MissingDependencyError", "Scorer", "Splits", "Task",
    "available_sets", "check_task_id", "check_unique", "checked", "contains", "exact", "f1", "get_scorer",
    "llm_judge", "load_csv", "load_hf", "load_jsonl", "load_parquet", "load_set", "normalize", "normalized_exact",
    "numbers_in", "numeric", "parse_jsonl", "parse_score", "recommended_scorer", "split", "tasks_from_rows",
]

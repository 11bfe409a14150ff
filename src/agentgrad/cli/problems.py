"""Turn a pydantic `ValidationError` into one readable line per problem: the dotted key and what was expected."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from agentgrad.cli.tables import Table


def _model_of(annotation: Any, metadata: tuple[Any, ...] = ()) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X | None``, ``Annotated[X, ...]``, a `Table`), if any."""
    for item in metadata:
        if isinstance(item, Table):
            return item.model
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return _model_of(inner, tuple(extra))
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


def allowed_keys(root: type[BaseModel], path: tuple[int | str, ...]) -> list[str]:
    """The keys the table at `path` accepts (empty when `path` does not lead to a table)."""
    model: type[BaseModel] | None = root
    for part in path:
        if model is None:
            return []
        fields = {(f.alias or name): f for name, f in model.model_fields.items()}
        field = fields.get(str(part))
        model = None if field is None else _model_of(field.annotation, tuple(field.metadata))
    if model is None:
        return []
    return sorted((f.alias or name) for name, f in model.model_fields.items())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(error: ValidationError, root: type[BaseModel]) -> list[str]:
    """One line per problem: ``key.path: what was expected (got value)``."""
    lines: list[str] = []
    for item in error.errors(include_url=False):
        location = tuple(item["loc"])
        key = ".".join(str(p) for p in location) or "(top level)"
        kind, message = item["type"], str(item["msg"])
        if kind == "missing":
            text = "required, but missing"
        elif kind == "extra_forbidden":
            allowed = allowed_keys(root, location[:-1])
            text = "unknown key" + (f"; expected one of {allowed}" if allowed else "")
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            text = f"expected a table (got {_shown(item.get('input'))})"
        elif kind == "value_error":
            text = message.removeprefix("Value error, ")
        else:
            text = message.replace("Input should be", "expected") + f" (got {_shown(item.get('input'))})"
        lines.append(f"{key}: {text}")
    return lines

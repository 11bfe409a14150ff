"""Configuration-file tables derived from frozen dataclasses: a pydantic model per dataclass, made from
`dataclasses.fields()` and the fields' annotations, so that the dataclass's own types and defaults are the file's.

A table holds only the keys a file gives. A key left out keeps the dataclass's default, because the value is built
with ``dataclasses.replace(default, **given)`` (or ``cls(**given)`` when the class has no valid default), never
from copied values. A field's annotation maps to what a TOML or YAML file can hold:

- bool, int, float, str: as they are, strictly (``true`` is no int, ``1`` no bool; an int is a valid float);
- an `Enum`: one of its values;
- a nested dataclass: a nested table (``[run.gate]``), built the same way from the parent's default for that field;
- a type with `Form`\\ s in the `Schema`: also (or only) those forms (``workers = 4``; a schedule table);
- ``X | None``: the mapped X or nothing (``null`` in YAML); a union of several: one of them, one error line;
- a function (a `Callable`): no key; the `Schema` may give a stand-in the value is checked with.

Every table forbids unknown keys. When the dataclass's own check (`__post_init__`, or the `Schema`'s extra check)
raises a ValueError (`ConfigError` is one), the problem is reported at each key whose value, set alone on the
default, makes the check fail (or fail otherwise than the bare default does, for a class such as `Budget` whose
``cls()`` is invalid); when no single key does (a rule over several keys), at the table's own key.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    create_model,
)
from pydantic_core import CoreSchema, InitErrorDetails, core_schema

STRICT = ConfigDict(extra="forbid", strict=True)
PLAIN = {bool: "true or false", int: "an int", float: "a number", str: "a string"}
Given = dict[str, Any]


@dataclass(frozen=True)
class Form:
    """Another way a file writes a value of a runtime type: as `written` (a pydantic type; a dict type makes it a
    table), turned into the runtime value by `make` (a ValueError from `make` is reported at the key).
    `what` says it in an error ("an int (rollout workers)"); by default it is derived from `written`."""

    written: Any
    make: Callable[[Any], Any]
    what: str | None = None


@dataclass(frozen=True)
class Table:
    """A pydantic annotation, ``Annotated[T, table]``: validates a file table with `model`, then `build`\\ s the
    runtime value from the keys the file gave (by their file names)."""

    cls: type
    model: type[BaseModel]
    build: Callable[[Given], Any]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self._from_model, handler.generate_schema(self.model))

    def _from_model(self, table: BaseModel) -> Any:
        given = table.model_fields_set  # a set: read in the fields' order, so that errors come in a fixed order
        return self.build({info.alias or name: getattr(table, name) for name, info in type(table).model_fields.items()
                           if name in given})

    def keys(self) -> list[str]:
        """The keys the table accepts, in the dataclass's order."""
        return [info.alias or name for name, info in self.model.model_fields.items()]


@dataclass(frozen=True)
class _Member:
    """One way a key may be written: a pydantic annotation, whether it is a table, and what makes the value."""

    annotation: Any
    table: bool
    make: Callable[[Any], Any] | None = None
    what: str = ""


@dataclass(frozen=True)
class Schema:
    """What the tables know beyond the dataclasses' annotations; every table of a `Schema` is built by `table`.

    Args:
        forms: more ways to write a type (its own way, if any, stays first).
        functions: stand-ins for function fields, by (dataclass, field name): a file cannot hold a function, so the
            value is checked with the stand-in in that field; whoever runs it puts the real function there.
        checks: a check run on each built value of a dataclass, beside its own `__post_init__`.
    """

    forms: Mapping[Any, tuple[Form, ...]] = field(default_factory=dict)
    functions: Mapping[tuple[type, str], Callable[..., Any]] = field(default_factory=dict)
    checks: Mapping[type, Callable[[Any], object]] = field(default_factory=dict)

    def table(self, cls: type, default: Any = None, *, own: Mapping[str, Any] | None = None,
              into: Callable[[Any, Given], Any] | None = None) -> Table:
        """The file table of dataclass `cls`; a file's keys replace those of `default` (None: ``cls()``, if valid).

        `own` are keys of the file's table that are no field of `cls` (name: pydantic type); `into(value, given)`
        then makes the result from the built `cls` value and the `own` keys the file gave.
        """
        base = default if isinstance(default, cls) else _default_of(cls)
        model = create_model(f"{cls.__name__}Table", __config__=STRICT, **self._fields(cls, base), **_own(own or {}))
        builder = _Builder(cls, base, self.checks.get(cls), _stand_ins(self.functions, cls))
        own_keys = frozenset(own or {})

        def build(given: Given) -> Any:
            value = builder.build({k: v for k, v in given.items() if k not in own_keys})
            return value if into is None else into(value, {k: v for k, v in given.items() if k in own_keys})

        return Table(cls, model, build)

    def _fields(self, cls: type, base: Any) -> dict[str, Any]:
        """The pydantic fields of `cls`'s table (a nested table starts from `base`'s value of its field)."""
        hints = typing.get_type_hints(cls)
        found: dict[str, Any] = {}
        for item in dataclasses.fields(cls):
            if not item.init:
                continue
            default = getattr(base, item.name) if base is not None else _field_default(item)
            annotation = self.file_type(hints[item.name], f"{cls.__name__}.{item.name}", default)
            if annotation is not None:
                required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
                found[f"key_{item.name}"] = (annotation, Field(alias=item.name) if required else
                                             Field(None, alias=item.name))
        return found

    def file_type(self, annotation: Any, where: str, default: Any = None) -> Any | None:
        """The pydantic type a file writes `annotation` as (None: a function, no key); `where` names it in errors."""
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        parts = typing.get_args(annotation) if union else (annotation,)
        members = [m for part in parts if part is not type(None) for m in self._members(part, where, default)]
        if not members:
            return None
        chosen = _one(members[0]) if len(members) == 1 else _either(members, where)
        return chosen | None if type(None) in parts else chosen

    def _members(self, kind: Any, where: str, default: Any) -> list[_Member]:
        forms = [_Member(f.written, _is_table(f.written), f.make, f.what or _what(f.written))
                 for f in self.forms.get(kind, ())]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            table = self.table(kind, default)
            return [_Member(Annotated[kind, table], True, None, f"a table of {', '.join(table.keys())}"), *forms]
        if isinstance(kind, type) and issubclass(kind, Enum):
            values = ", ".join(repr(e.value) for e in kind)
            return [_Member(Annotated[kind, Strict(False)], False, None, f"one of {values}"), *forms]
        if kind in PLAIN:
            return [_Member(kind, False, None, PLAIN[kind]), *forms]
        if _is_function(kind) or forms:
            return forms
        raise TypeError(f"{where}: a configuration file cannot hold a {kind!r}; give the Schema a Form for it")


class _Builder:
    """Builds one dataclass from the keys a file gave, and names the keys its checks reject."""

    def __init__(self, cls: type, base: Any, check: Callable[[Any], object] | None,
                 stand_ins: Mapping[str, Any]) -> None:
        self.cls, self.base, self.check, self.stand_ins = cls, base, check, stand_ins
        self.base_problem = None if base is not None else _problem(self._make, {})

    def _make(self, given: Given) -> Any:
        values = {**self.stand_ins, **given}
        value = dataclasses.replace(self.base, **values) if self.base is not None else self.cls(**values)
        if self.check is not None:
            self.check(value)
        return value

    def build(self, given: Given) -> Any:
        """The dataclass; a failed check raises a `ValidationError` at the keys that alone make it fail (none
        found: a ValueError, reported at the table's key)."""
        try:
            return self._make(given)
        except ValueError as exc:
            problem = str(exc)
        lines: list[InitErrorDetails] = []
        for key, value in given.items():
            alone = _problem(self._make, {key: value})
            if alone is not None and alone != self.base_problem:
                lines.append(InitErrorDetails(type="value_error", loc=(key,), input=value,
                                              ctx={"error": ValueError(alone)}))
        if not lines:
            raise ValueError(problem)
        raise ValidationError.from_exception_data(self.cls.__name__, lines)


def _problem(make: Callable[[Given], Any], given: Given) -> str | None:
    """What `make(given)` fails with (None: it works, or fails for a reason that names no value)."""
    try:
        make(given)
    except ValueError as exc:
        return str(exc)
    except TypeError:  # a required field left out of a trial: no finding about the value tried
        return None
    return None


def _either(members: list[_Member], where: str) -> Any:
    """One key written in one of several ways: a table (at most one way is) or a scalar; one error line."""
    tables = [m for m in members if m.table]
    if len(tables) > 1:
        raise TypeError(f"{where}: a configuration file cannot tell apart two kinds of table")
    scalars = [(TypeAdapter(m.annotation, config=STRICT), m) for m in members if not m.table]
    expected = " or ".join(m.what for m in sorted(members, key=lambda m: m.table))  # a table last

    def choose(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if tables and isinstance(value, dict):
            return _made(tables[0], handler(value))
        for adapter, member in scalars:
            try:
                checked = adapter.validate_python(value)
            except ValidationError:
                continue
            return _made(member, checked)
        raise ValueError(f"expected {expected} (got {_shown(value)})")

    return Annotated[tables[0].annotation if tables else Any, WrapValidator(choose)]


def _one(member: _Member) -> Any:
    return member.annotation if member.make is None else Annotated[member.annotation, AfterValidator(member.make)]


def _made(member: _Member, value: Any) -> Any:
    return value if member.make is None else member.make(value)


def _default_of(cls: type) -> Any:
    """``cls()``, or None when the class has no valid default (a required field, or a check that fails)."""
    try:
        return cls()
    except (TypeError, ValueError):
        return None


def _field_default(item: dataclasses.Field[Any]) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return dataclasses.MISSING


def _own(own: Mapping[str, Any]) -> dict[str, Any]:
    return {f"own_{name}": (annotation, Field(None, alias=name)) for name, annotation in own.items()}


def _stand_ins(functions: Mapping[tuple[type, str], Callable[..., Any]], cls: type) -> dict[str, Any]:
    return {name: function for (owner, name), function in functions.items() if owner is cls}


def _is_function(kind: Any) -> bool:
    return kind is Callable or typing.get_origin(kind) is Callable


def _is_table(written: Any) -> bool:
    return written is dict or typing.get_origin(written) in (dict, Mapping)


def _what(written: Any) -> str:
    return "a table" if _is_table(written) else PLAIN.get(written, repr(written))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

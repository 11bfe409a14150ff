"""The run configuration file (TOML or YAML), validated with pydantic.

Sections: ``[task]`` (the simulated reference world, a shipped set or a data file, and how to score it),
``[model]`` (a named model, or the user's own ``run`` / ``propose`` functions by import path), ``[budget]`` (every
`Budget` field) and ``[run]`` (every `RunConfig` field, and the run directory); the last two are derived from the
runtime's dataclasses in `cli.schema`, which this module imports only to validate a file (it imports the runtime).
Unknown keys are errors. A bad file raises `ConfigFileError` holding one line per problem: the dotted key and what
was expected.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentgrad.cli.imports import check_import_path
from agentgrad.errors import ConfigError

if TYPE_CHECKING:
    from agentgrad.cli.schema import CliConfig

STRICT = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
Count = Annotated[int, Field(ge=0)]
Positive = Annotated[int, Field(ge=1)]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0, le=1)]
BUILTIN_SCORERS = ("contains", "exact", "f1", "normalized_exact", "numeric")
# what `cli.launch` passes a recipe's entry point itself (from [task], [model], [budget] and [run]), not options
LAUNCH_SETS = frozenset({"run", "model", "reflector", "artifact", "budget", "asynchronous", "workers", "store", "seed",
                         "callbacks"})
MODEL_KINDS = "'local', 'local:<gguf path>', 'openai:<model>' or 'anthropic:<model>'"


class ConfigFileError(ConfigError):
    """A configuration file that cannot be used; `problems` has one line per problem (key: what was expected)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: " + "; ".join(problems))
        self.source = source
        self.problems = tuple(problems)


class WorldSection(BaseModel):
    """The simulated reference world (`WorldConfig` fields) and its agent's latency (`WorldAgent`)."""

    model_config = STRICT
    seed: int = 0
    n_categories: Positive = 8
    tasks_per_category: Positive = 12
    n_methods: Annotated[int, Field(ge=2)] = 9
    noise: Probability = 0.05
    base_rate: Probability = 0.0
    p_right: Probability = 0.5
    p_junk: Probability = 0.2
    p_contradict: Probability = 0.15
    p_duplicate: Probability = 0.15
    train: Probability = 0.5
    val: Probability = 0.25
    test: Probability = 0.25
    median: Amount = 0.0
    sigma: Amount = 1.5
    fail_every: Count = 0

    @model_validator(mode="after")
    def _world_is_consistent(self) -> WorldSection:
        from agentgrad.testing.world import WorldConfig

        try:
            WorldConfig(**self.world_fields())
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def world_fields(self) -> dict[str, Any]:
        """The `WorldConfig` keyword arguments."""
        return self.model_dump(exclude={"median", "sigma", "fail_every"})


class TaskSection(BaseModel):
    """What to train on: exactly one of `world`, `set` (a shipped set) or `path` (a JSONL, CSV or Parquet file)."""

    model_config = STRICT
    world: WorldSection | None = None
    set_: str | None = Field(None, alias="set")
    path: str | None = None
    prompt: str = "question"
    gold: str = "answer"
    id: str | None = None
    score: str | None = None
    skill: str = ""

    @field_validator("set_")
    @classmethod
    def _known_set(cls, value: str | None) -> str | None:
        from agentgrad.data.shipped import available_sets

        if value is not None and value not in available_sets():
            raise ValueError(f"expected one of the shipped sets {available_sets()}, got {value!r}")
        return value

    @field_validator("path")
    @classmethod
    def _file_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path = resolve_path(value, info.context)
        if path.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
            raise ValueError(f"expected a .jsonl, .csv or .parquet file, got {value!r}")
        if not path.is_file():
            raise ValueError(f"expected an existing data file, but {str(path)!r} does not exist")
        return str(path)

    @field_validator("score")
    @classmethod
    def _known_score(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and value not in BUILTIN_SCORERS:
            check_import_path(value, base_dir(info.context), what=f"a built-in scorer {list(BUILTIN_SCORERS)} or",
                              resolve=imports_allowed(info.context))
        return value

    @model_validator(mode="after")
    def _one_source(self) -> TaskSection:
        given = [name for name, value in (("world", self.world), ("set", self.set_), ("path", self.path))
                 if value is not None]
        if len(given) != 1:
            raise ValueError(f"expected exactly one of 'world', 'set' or 'path', got {given or 'none'}")
        extra = sorted(self.model_fields_set - {"world"})
        if self.world is not None and extra:
            raise ValueError(f"the world brings its own tasks and scores; remove {extra}")
        return self


class ModelSection(BaseModel):
    """Who solves and proposes: a named model, or `run` and `propose` functions ("module:function")."""

    model_config = STRICT
    name: str | None = None
    run: str | None = None
    propose: str | None = None
    repair: str | None = None
    params: dict[str, Any] | None = None

    @field_validator("name")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        if value is None:
            return None
        kind, colon, rest = value.partition(":")
        if kind == "local" or (kind in ("openai", "anthropic") and colon and rest):
            return value
        raise ValueError(f"expected a model {MODEL_KINDS}, got {value!r}")

    @field_validator("run", "propose", "repair")
    @classmethod
    def _importable(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            check_import_path(value, base_dir(info.context), resolve=imports_allowed(info.context))
        return value

    @model_validator(mode="after")
    def _who(self) -> ModelSection:
        own = (self.run is not None, self.propose is not None)
        if self.name is not None and any(own):
            raise ValueError("expected either 'name' or 'run' and 'propose', not both")
        if self.name is None and not own[0]:
            raise ValueError(f"expected 'name' (a model {MODEL_KINDS}) or both 'run' and 'propose' functions")
        if self.params is not None and self.name is None:
            raise ValueError("'params' go to a named model's calls; with your own 'run', set them there")
        return self


class RecipeSection(BaseModel):
    """``[recipe]``: run a published method (`agentgrad.algorithms`) instead of the default proposer: its name, the
    model that writes its proposals (``reflector``: a model name, or a "module:function" giving a provider or
    answering ``(messages) -> text``; default: the [model] name), and its options (keyword arguments of its entry
    point, such as ``minibatch = 3`` for GEPA)."""

    model_config = STRICT
    name: str
    reflector: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known_recipe(cls, value: str) -> str:
        from agentgrad.algorithms.catalog import NAMES

        if value not in NAMES:
            raise ValueError(f"expected one of the recipes {list(NAMES)}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _known_options(self) -> RecipeSection:
        import inspect

        from agentgrad.algorithms.catalog import entry_point

        clash = sorted(set(self.options) & LAUNCH_SETS)
        if clash:
            raise ValueError(f"options {clash} are set by the other sections ([task], [model], [budget], [run]), not "
                             "as recipe options")
        parameters = inspect.signature(entry_point(self.name)).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return self  # the recipe passes its options on, and checks them there
        takes = sorted(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY
                       and p.name not in LAUNCH_SETS)
        unknown = sorted(set(self.options) - set(takes))
        if unknown:
            raise ValueError(f"options {unknown} are not options of recipe {self.name!r}; it takes {takes}")
        _check_option_types(entry_point(self.name), self.options)
        return self

    @field_validator("reflector")
    @classmethod
    def _known_reflector(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        kind, colon, rest = value.partition(":")
        if kind == "local" or (kind in ("openai", "anthropic") and colon and rest):
            return value
        # a "module:function": a provider, or (messages) -> text
        check_import_path(value, base_dir(info.context), resolve=imports_allowed(info.context))
        return value


_PLAIN = (int, float, bool, str)


def _check_option_types(fn: Any, options: Mapping[str, Any]) -> None:
    """Refuse a recipe option whose value is not of its plain type (int, float, bool or str) in the recipe's
    signature; options of other types are the recipe's to check."""
    hints = get_type_hints(fn)
    for name, value in options.items():
        kind = hints.get(name)
        if kind not in _PLAIN:
            continue
        try:
            TypeAdapter(kind).validate_python(value, strict=True)
        except ValidationError as exc:
            raise ValueError(f"option {name!r} of recipe {getattr(fn, '__name__', fn)!r} must be "
                             f"{'a' if kind is not int else 'an'} {kind.__name__}, got {value!r}") from exc


@dataclass(frozen=True)
class ConfigSource:
    """A configuration file's text, its format and the directory relative paths and modules are found in."""

    text: str
    format: Literal["toml", "yaml"]
    base_dir: str
    name: str

    def to_dict(self) -> dict[str, str]:
        return {"text": self.text, "format": self.format, "base_dir": self.base_dir, "name": self.name}

    @classmethod
    def from_dict(cls, data: Any) -> ConfigSource:
        if not isinstance(data, dict) or data.get("format") not in ("toml", "yaml"):
            raise ConfigError(f"the run directory's stored configuration is malformed: {data!r:.120}")
        return cls(str(data["text"]), data["format"], str(data["base_dir"]), str(data["name"]))


def imports_allowed(context: Any) -> bool:
    """False when the validation context says to check `module:function` names by form only (`parse_config`)."""
    return not (isinstance(context, dict) and context.get("imports") is False)


def base_dir(context: Any) -> Path | None:
    """The config file's directory, from a validation context."""
    value = context.get("base_dir") if isinstance(context, dict) else None
    return Path(value) if value is not None else None


def resolve_path(value: str, context: Any) -> Path:
    """`value` as a path, relative to the config file's directory."""
    path = Path(value).expanduser()
    folder = base_dir(context)
    return path if path.is_absolute() or folder is None else (folder / path).resolve()


def read_source(path: Path) -> ConfigSource:
    """Read a configuration file; the format comes from its suffix (.toml, .yaml or .yml)."""
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml"):
        raise ConfigFileError(str(path), [f"expected a .toml, .yaml or .yml file, got {path.name!r}"])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(str(path), [f"cannot read the file ({exc})"]) from exc
    return ConfigSource(text, "toml" if suffix == ".toml" else "yaml", str(path.resolve().parent), str(path))


def parse_text(source: ConfigSource) -> Any:
    """The raw content of a configuration (tables as dicts), not yet validated."""
    if source.format == "toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            return tomllib.loads(source.text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigFileError(source.name, [f"not valid TOML: {exc}"]) from exc
    import importlib

    yaml = importlib.import_module("yaml")  # PyYAML ships no type stubs; treated as Any
    try:
        return yaml.safe_load(source.text)
    except yaml.YAMLError as exc:
        raise ConfigFileError(source.name, [f"not valid YAML: {' '.join(str(exc).split())}"]) from exc


def parse_config(source: ConfigSource, *, imports: bool = True) -> CliConfig:
    """Validate a configuration; `ConfigFileError` lists every problem with its dotted key. With `imports` False,
    a `module:function` is checked by its form and not imported (the service's web process)."""
    data = parse_text(source)
    if not isinstance(data, dict):
        raise ConfigFileError(source.name, [f"expected a table of sections at the top, got {type(data).__name__}"])
    from agentgrad.cli.schema import CliConfig

    try:
        return CliConfig.model_validate(data, context={"base_dir": source.base_dir, "imports": imports})
    except ValidationError as exc:
        from agentgrad.cli.problems import describe

        raise ConfigFileError(source.name, describe(exc, CliConfig)) from None


def load_config(path: Path) -> tuple[ConfigSource, CliConfig]:
    """Read and validate a configuration file."""
    source = read_source(path)
    return source, parse_config(source)

"""The whole configuration file's model: ``[task]`` and ``[model]`` (see `cli.config`), ``[budget]`` and ``[run]``.

The ``[budget]`` and ``[run]`` tables are derived from the runtime's dataclasses (`cli.tables`): every `Budget`
field is a key of ``[budget]`` and every `RunConfig` field a key of ``[run]``, with the runtime's types, defaults
and checks; nested dataclasses are nested tables (``[run.gate]``, ``[run.acceptance]``, ``[run.staleness]``,
``[run.workers]``). A field added to those dataclasses is a key with no change here. Beyond the annotations:

- ``workers`` may be an int (as `Workers.of`: that many rollout workers, half as many proposers and gate workers);
- ``acceptance.delta`` may be a schedule table (``{ name = "linear", start = 0.1, end = 0.02, steps = 10 }``,
  as `schedule_from_dict` reads it), and is checked to stay inside (0, 0.5) as `evolve` will;
- ``staleness.repair`` is a function, so no key: it comes from ``[model] repair`` (or the world's agent) when the
  run starts (`cli.launch`); a stand-in holds its place while the file is checked.

``[run]`` also has the CLI's own key ``store``, the run directory. This module imports the runtime, so the commands
import it only when they read a configuration (`cli.config.parse_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn

from pydantic import BaseModel, Field, model_validator

from agentgrad.cli.config import STRICT, ModelSection, RecipeSection, TaskSection
from agentgrad.cli.tables import Form, Schema
from agentgrad.errors import ConfigError
from agentgrad.optim.schedules import Schedule, delta_schedule, schedule_from_dict
from agentgrad.runtime.budget import Budget
from agentgrad.runtime.config import Acceptance, RunConfig, Staleness, StalePolicy, Workers


def _repair_at_launch(*args: Any) -> NoReturn:
    """Stands in for the repair function while a file is checked; `cli.launch` puts the real one in its place."""
    raise ConfigError("the repair function was not set: it comes from [model] repair (or the world) at launch")


def _check_delta(acceptance: Acceptance) -> None:
    delta_schedule(acceptance.delta)  # the check evolve() makes, made while the file is read


SCHEMA = Schema(
    forms={Workers: (Form(int, Workers.of, "an int (rollout workers)"),),
           Schedule: (Form(dict[str, Any], schedule_from_dict,
                           "a schedule table (name = 'constant', 'linear' or 'exponential', and its fields)"),)},
    functions={(Staleness, "repair"): _repair_at_launch},
    checks={Acceptance: _check_delta},
)


@dataclass(frozen=True)
class RunSection:
    """``[run]``: the `RunConfig` its keys set, and ``store``, the run directory (relative to the current
    directory; ``--run-dir`` overrides it)."""

    config: RunConfig = field(default_factory=RunConfig)
    store: str | None = None


def _run_section(config: RunConfig, own: dict[str, Any]) -> RunSection:
    return RunSection(config, **own)


BUDGET_TABLE = SCHEMA.table(Budget)
RUN_TABLE = SCHEMA.table(RunConfig, own={"store": str | None}, into=_run_section)


class CliConfig(BaseModel):
    """A whole configuration file: `budget` is the run's `Budget`, `run.config` its `RunConfig`."""

    model_config = STRICT
    task: TaskSection
    model: ModelSection | None = None
    recipe: RecipeSection | None = None
    budget: Annotated[Budget, BUDGET_TABLE]
    run: Annotated[RunSection, RUN_TABLE] = Field(default_factory=RunSection)

    @model_validator(mode="after")
    def _agent_matches_task(self) -> CliConfig:
        if self.task.world is not None and self.model is not None:
            raise ValueError("the world task brings its own simulated agent; remove the [model] section")
        if self.task.world is None and self.model is None:
            raise ValueError("expected a [model] section (name, or run and propose) for this task")
        if self.recipe is not None and self.task.world is not None:
            raise ValueError("a [recipe] runs on a task set and a [model] (name, or run), not on the world task")
        own = self.model is not None and self.model.name is None
        if own and self.recipe is None and self.model is not None and self.model.propose is None:
            raise ValueError("expected both 'run' and 'propose' functions in [model] (or a [recipe], whose method "
                             "proposes)")
        if self.recipe is not None and own and self.recipe.reflector is None and self.model is not None \
                and self.model.propose is None:
            raise ValueError("[recipe] with your own 'run' needs 'reflector' (the model that writes proposals)")
        repairs = self.task.world is not None or (self.model is not None and self.model.repair is not None)
        if self.run.config.staleness.policy is StalePolicy.REPAIR and not repairs:
            raise ValueError("run.staleness.policy = 'repair' needs model.repair (a 'module:function')")
        return self

"""The `calibrate` flow's parameters as one model, `CalibrateParams`: the flow's signature
and form, its docstring, the CLI's options and the deployment's parameters all read it.

The settings of what is measured are `CalibrationConfig`'s fields; this model adds how one
run goes (a fresh sample, resume, a loud failure, shards). Each field carries its type,
constraints, default and description once.

Why the flow takes the fields as top-level parameters and not one model parameter:
Prefect merges a deployment's parameters with `--param` / `--params` only at the top level,
so with one `settings` object `prefect deployment run calibrate/nightly --param
settings='{"repeats": 5}'` would replace the whole object and silently drop the
deployment's `max_spend` and `judge`. With top-level fields `--param repeats=5` changes one
setting and keeps the others. `takes_fields` gives the flow function the model's fields
as its signature (annotations with their constraints, defaults) and its docstring's
`Args:` (the descriptions), which is what Prefect's parameter schema and the UI's
Custom run form are built from; the flow body validates them into the model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import ConfigDict, Field, model_validator

from tokenlens.config import CalibrationConfig

#: The deployment that runs one shard ("flow/deployment").
SHARD_DEPLOYMENT = "calibrate-shard/shard"

F = TypeVar("F", bound=Callable[..., Any])


class CalibrateParams(CalibrationConfig):
    """Every parameter of the `calibrate` flow: the run's settings and how the run goes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fresh_sample: bool = Field(
        False,
        description="draw new answer seeds for this run (a schedule sees drift); off, a "
        "rerun reuses every paid call.",
    )
    fail_on_unresolved: bool = Field(
        True,
        description="end the flow run Failed (after publishing) when a requested class is "
        "unmeasurable, had no arm hold, or has too few tasks.",
    )
    resume: str | None = Field(
        None,
        description='a run id to resume with its own seeds ("latest": the newest unfinished '
        "run); the other settings then come from that run (the run-summary artifact and "
        "the flow run's parameters show them).",
    )
    shards: int | None = Field(
        None,
        ge=1,
        description="split the paid work into this many shards, each a flow run of "
        "shard_deployment that any worker of its pool may take; empty: this process pays "
        "for everything (the default).",
    )
    shard_deployment: str = Field(
        SHARD_DEPLOYMENT, description='the deployment that runs one shard ("flow/deployment").'
    )
    calls_limit: int | None = Field(
        None,
        ge=1,
        description="with shards, model calls in flight across all workers, per model (the "
        "Prefect global concurrency limit tokenlens-calls-<model>, created or resized); "
        "empty: leave any existing limit as it is.",
    )
    shard_lost_after: float = Field(
        600.0,
        gt=0,
        description="seconds without a heartbeat after which a running shard's worker "
        "counts as gone (the shard is marked Crashed, then resubmitted).",
    )
    shard_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="times a crashed shard is resubmitted before the run fails naming it "
        "(each attempt pays only for what the ledger lacks).",
    )

    @model_validator(mode="after")
    def _shards_fit_the_design(self) -> CalibrateParams:
        if self.shards is not None and self.design == "sequential":
            raise ValueError(
                "shards: the sequential design decides each round from every task's "
                "grades; run it without shards (or use design=fixed)"
            )
        return self

    @classmethod
    def of(cls, config: CalibrationConfig, **options: Any) -> CalibrateParams:
        """The parameters of a run of `config` (plus `fresh_sample`, `resume`, ...); the
        fields `config` was given explicitly stay the explicitly set ones."""
        given = {name: getattr(config, name) for name in config.model_fields_set}
        return cls(**given, **options)

    def config(self) -> CalibrationConfig:
        """The settings of what is measured (the run options left out)."""
        names = set(CalibrationConfig.model_fields) & self.model_fields_set
        return CalibrationConfig(**{name: getattr(self, name) for name in names})

    def flow_kwargs(self) -> dict[str, Any]:
        """Every parameter, JSON-ready: what `calibrate(**...)` and the API take."""
        return self.model_dump(mode="json")


def flow_parameters(config: CalibrationConfig, **options: Any) -> dict[str, Any]:
    """The flow's parameters for a config (plus `fresh_sample`, `resume`, ...)."""
    return CalibrateParams.of(config, **options).flow_kwargs()


def takes_fields(model: type[CalibrationConfig]) -> Callable[[F], F]:
    """Give a `**parameters` function the model's fields as keyword-only parameters (its
    `__signature__`) and their descriptions as its docstring's `Args:`, the two things
    Prefect reads to build a flow's parameter schema (see the module docstring)."""

    def decorate(fn: F) -> F:
        parameters = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=field.get_default(call_default_factory=True),
                annotation=(
                    Annotated[(field.annotation, *field.metadata)]
                    if field.metadata
                    else field.annotation
                ),
            )
            for name, field in model.model_fields.items()
        ]
        returns = inspect.signature(fn).return_annotation
        fn.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
        # One line each: Prefect's docstring parser keeps a wrapped line's line breaks.
        args = "".join(
            f"    {name}: {field.description or ''}\n" for name, field in model.model_fields.items()
        )
        fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n\nArgs:\n" + args
        return fn

    return decorate

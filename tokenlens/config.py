"""The calibration's settings as one typed object.

The CLI, the Prefect flow's parameters and the ledger's keys all read this one model, so a
setting means the same thing everywhere and a run can be rebuilt from its recorded config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tokenlens.tasks import DEFAULT_TASKS_PATH, CalibrationTask, load_tasks, select_tasks

#: The methods of the ladder, gentlest first. `control` is not a rung and is always run.
DEFAULT_METHODS: tuple[str, ...] = ("safe", "minify", "dedup", "prune", "select", "llmlingua2")
DEFAULT_RATES: tuple[float, ...] = (0.8, 0.6, 0.4)
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
DEFAULT_LLMLINGUA_MODEL = "microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank"
REPORTS_DIR = Path("reports")
#: Defaults of `store` and `reports`: local folders; either may be a URL (`s3://...`).
DEFAULT_REPORTS = "reports"
DEFAULT_STORE = "reports/store"
#: How long a certified policy entry may stay in force without a run re-certifying it.
DEFAULT_MAX_POLICY_AGE_DAYS = 7.0

Backend = Literal["auto", "anthropic", "local"]
JudgeKind = Literal["metric", "llm", "both"]
DecisionMode = Literal["interval", "mean"]


class CalibrationConfig(BaseModel):
    """Everything that decides what a calibration run does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: Path = DEFAULT_TASKS_PATH
    classes: tuple[str, ...] | None = None
    max_tasks_per_class: int | None = Field(default=None, ge=1)
    #: With a per-class cap: keep each class's shortest tasks rather than its first ones.
    shortest_tasks_first: bool = False
    methods: tuple[str, ...] = DEFAULT_METHODS
    rates: tuple[float, ...] = DEFAULT_RATES
    repeats: int = Field(default=3, ge=1, le=50)
    backend: Backend = "auto"
    model: str | None = None  # None: the backend's default (Haiku, or the bundled GGUF)
    max_tokens: int = Field(default=512, ge=16)
    temperature: float = Field(default=1.0, ge=0.0, le=1.0)
    judge: JudgeKind = "metric"
    judge_model: str | None = None
    judge_both_orders: bool = False
    judge_twice: bool = False  # re-judge control pairs to split the noise floor
    tolerance: float = Field(default=0.95, gt=0.0, le=1.0)
    mode: DecisionMode = "interval"
    concurrency: int = Field(default=4, ge=1, le=64)
    max_spend: float | None = Field(default=None, gt=0)
    batch: bool = False
    #: fixed: every task x arm x repeat up front; sequential: rounds that pay only until
    #: each decision is made (`tokenlens.decision.sequential`).
    design: Literal["fixed", "sequential"] = "fixed"
    #: Where the run tables, manifests and the call ledger live; `reports`: where the
    #: policies and reports are published. A local path or an fsspec URL such as
    #: ``s3://bucket/prefix`` (see `tokenlens.storage`); kept as text, since a `Path`
    #: would fold ``s3://`` into ``s3:/``.
    store: str = DEFAULT_STORE
    reports: str = DEFAULT_REPORTS
    llmlingua_model: str = DEFAULT_LLMLINGUA_MODEL
    seed: int = 0
    #: Days a certified policy entry stays in force without a run re-certifying it; a run
    #: that could not measure a class carries its last certified entry over until then
    #: (`tokenlens.decision.carryover`), and the proxy applies no entry past it. None: no
    #: limit. Publishing reads it; it is not part of what was measured (not in the id).
    max_policy_age: float | None = Field(default=DEFAULT_MAX_POLICY_AGE_DAYS, gt=0)

    @field_validator("store", "reports", mode="before")
    @classmethod
    def _location_text(cls, value: object) -> object:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty location; give a folder or a URL such as s3://bucket/prefix")
        return value

    @field_validator("rates")
    @classmethod
    def _rates_in_range(cls, rates: tuple[float, ...]) -> tuple[float, ...]:
        for rate in rates:
            if not 0.0 < rate < 1.0:
                raise ValueError(f"rate {rate} is not a keep fraction in (0, 1)")
        return tuple(sorted(set(rates), reverse=True))

    def resolved_backend(self) -> Literal["anthropic", "local"]:
        """`auto` means Anthropic when a key is configured, else the embedded local model."""
        if self.backend != "auto":
            return self.backend
        return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else "local"

    def selected_tasks(self) -> list[CalibrationTask]:
        """The run's tasks: the file's, filtered by class, capped per class."""
        return select_tasks(
            load_tasks(self.tasks, classes=self.classes),
            max_per_class=self.max_tasks_per_class,
            shortest_first=self.shortest_tasks_first,
        )

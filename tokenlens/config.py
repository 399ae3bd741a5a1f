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

Backend = Literal["auto", "anthropic", "local"]
JudgeKind = Literal["metric", "llm", "both"]
DecisionMode = Literal["interval", "mean"]


class CalibrationConfig(BaseModel):
    """Everything that decides what a calibration run does.

    Each field's description is what the flow's form, its docstring and the CLI's help
    show (`tokenlens.calibration.params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: Path = Field(DEFAULT_TASKS_PATH, description="JSONL task file (on the worker).")
    classes: tuple[str, ...] | None = Field(
        None, description="task classes to calibrate; empty for every class in the file."
    )
    max_tasks_per_class: int | None = Field(
        None, ge=1, description="cap on tasks per class; empty for all."
    )
    shortest_tasks_first: bool = Field(
        False, description="with a cap, keep each class's shortest tasks (not its first)."
    )
    methods: tuple[str, ...] = Field(
        DEFAULT_METHODS,
        description="ladder methods, gentlest first (safe, minify, dedup, prune, select, "
        "llmlingua2).",
    )
    rates: tuple[float, ...] = Field(
        DEFAULT_RATES, description="keep fractions of the rate-taking methods, e.g. 0.8, 0.6, 0.4."
    )
    repeats: int = Field(3, ge=1, le=50, description="answer pairs per task and arm.")
    backend: Backend = Field(
        "auto", description="anthropic, local, or auto (anthropic when ANTHROPIC_API_KEY is set)."
    )
    model: str | None = Field(
        None, description="answer model; empty for the backend's default (Haiku, or the GGUF)."
    )
    max_tokens: int = Field(512, ge=16, description="answer length cap in tokens.")
    temperature: float = Field(
        1.0, ge=0.0, le=1.0, description="sampling temperature of the answers."
    )
    judge: JudgeKind = Field(
        "metric", description="metric (no model), llm (blind LLM judge) or both."
    )
    judge_model: str | None = Field(
        None, description="model of the LLM judge; empty for the answer model."
    )
    judge_both_orders: bool = Field(False, description="judge each pair in both A/B orders.")
    judge_twice: bool = Field(False, description="re-judge control pairs to split the noise floor.")
    tolerance: float = Field(0.95, gt=0.0, le=1.0, description="retention an arm must keep (0-1).")
    mode: DecisionMode = Field(
        "interval", description="interval (the 95% bound must clear) or mean (the seed's rule)."
    )
    concurrency: int = Field(4, ge=1, le=64, description="model calls in flight.")
    max_spend: float | None = Field(
        None,
        gt=0,
        description="USD cap on this run's new calls, over all its attempts; empty for none.",
    )
    batch: bool = Field(False, description="use the Message Batches API (half price, slower).")
    #: `tokenlens.decision.sequential` holds the sequential design.
    design: Literal["fixed", "sequential"] = Field(
        "fixed",
        description="fixed (every task x arm x repeat up front) or sequential (rounds; pay "
        "only until each arm's verdict is settled).",
    )
    #: Kept as text, since a `Path` would fold ``s3://`` into ``s3:/`` (`tokenlens.storage`).
    store: str = Field(
        DEFAULT_STORE,
        description="root of the Parquet tables, run manifests and the call ledger: a folder "
        "on the worker or a URL such as s3://bucket/prefix/store.",
    )
    reports: str = Field(
        DEFAULT_REPORTS,
        description="root of the published policies and reports (folder or URL).",
    )
    llmlingua_model: str = Field(
        DEFAULT_LLMLINGUA_MODEL, description="LLMLingua-2 model (hub name or local path)."
    )
    seed: int = Field(0, description="sample seed of a run that does not ask for a fresh sample.")

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

"""The calibration's settings as one typed object.

The CLI, the Prefect flow's parameters and the ledger's keys all read this one model, so a
setting means the same thing everywhere and a run can be rebuilt from its recorded config.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tokenlens.tasks import (
    DEFAULT_TASKS_PATH,
    LOOKUP_TASKS_PATH,
    CalibrationTask,
    load_tasks,
    select_tasks,
)

#: The methods of the ladder, gentlest first. `control` is not a rung and is always run.
DEFAULT_METHODS: tuple[str, ...] = ("safe", "minify", "dedup", "prune", "select", "llmlingua2")
DEFAULT_RATES: tuple[float, ...] = (0.8, 0.6, 0.4)
#: The tool-output rungs a calibration walks per kind of tool output, gentlest first, when
#: its tasks hold tool results (`tokenlens.decision.tool_kinds`).
DEFAULT_TOOL_RUNGS: tuple[str, ...] = (
    "lossless",
    "elide@0.9",
    "elide@0.8",
    "elide@0.7",
    "elide@0.6",
    "elide@0.5",
    "elide@0.3",
)
#: `--tool-rungs none`: no tool-output rungs.
NO_TOOL_RUNGS = "none"
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
    """Everything that decides what a calibration run does.

    Each field's description is what the flow's form, its docstring and the CLI's help
    show (`tokenlens.calibration.params`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: Path = Field(DEFAULT_TASKS_PATH, description="JSONL task file (on the worker).")
    classes: tuple[str, ...] | None = Field(
        None,
        description="task classes to calibrate; empty for every class in the file (offline: "
        "one class; `all` on the command line for every class).",
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
    tool_rungs: tuple[str, ...] | None = Field(
        None,
        description="tool-output rungs (lossless, elide@R) walked per kind of tool output "
        "when the tasks hold tool results; empty for lossless, elide@0.9, 0.7, 0.5, 0.3; "
        "`none` for none.",
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
    #: `tokenlens.decision.reanswer` holds the rule (its spread, count and guard).
    reanswer: bool = Field(
        False,
        description="after the planned repeats, pay 3 more answers for each task x arm "
        "(never the control) whose repeats' grades disagree by more than 20 points, every "
        "answer counted; an arm whose answers derailed more often than the control's is "
        "read on its planned repeats alone (the sequential design re-answers at each arm's "
        "last look).",
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
    #: Publishing reads it; it is not part of what was measured (not in the id).
    max_policy_age: float | None = Field(
        DEFAULT_MAX_POLICY_AGE_DAYS,
        gt=0,
        description="days a certified policy entry stays in force unless a run re-certifies "
        "it; a run that cannot measure a class carries its last entry over until then "
        "(tokenlens.decision.carryover), and the proxy applies no entry past it; empty "
        "(`none` on the command line) for no limit.",
    )

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

    @field_validator("tool_rungs")
    @classmethod
    def _tool_rungs_known(cls, rungs: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if rungs is None:
            return None
        if tuple(r.strip().lower() for r in rungs) == (NO_TOOL_RUNGS,):
            return ()
        from tokenlens.compress.toolout.rungs import ToolArm

        return tuple(dict.fromkeys(ToolArm.parse(rung).key for rung in rungs))

    def with_tool_rungs(self, tasks: Iterable[CalibrationTask]) -> CalibrationConfig:
        """The settings with `tool_rungs` resolved for these tasks: the rungs asked for (by
        default `DEFAULT_TOOL_RUNGS`) when a task holds a tool result, else none, so a run
        on plain text tasks measures (and is identified by) the arms it always had. The
        sequential design walks text arms only (its rounds sample per class, and the tool
        rungs are walked per kind): none there either."""
        from tokenlens.fidelity import tool_outputs

        holds = self.design == "fixed" and any(
            task.body is not None and tool_outputs(task.body) for task in tasks
        )
        rungs = (
            (DEFAULT_TOOL_RUNGS if self.tool_rungs is None else self.tool_rungs) if holds else ()
        )
        return self if rungs == self.tool_rungs else self.model_copy(update={"tool_rungs": rungs})

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


# --------------------------------------------------------------------------- offline scope
#
# On the embedded local model (2 CPU cores, seconds per answer) the online defaults would
# take hours and decide nothing: every class short of the tasks a verdict needs. So an
# offline run, for each setting the user did not choose, measures a scope that can reach
# a verdict in minutes (`offline_scope`), and says what it chose and how to widen it. The
# choice is measured on the default model (`bench/bench_models.py --compare`, figures in
# docs/benchmarks.md).

#: The task set when the user names none: one value read from a short tool output (a key
#: of a botocore JSON model, a version in `pip show`, a number in a short module), which
#: the default model reads right and the fact grader grades without noise; its prompts are
#: a few hundred tokens, so an answer costs seconds. Measured on the default model, the
#: starter set's `extraction` answers were right on under half the tasks read by hand and
#: cost about 18 CPU-seconds each; the agent set's shortest file reads were right on 8 of
#: 14 (docs/benchmarks.md).
OFFLINE_TASKS = LOOKUP_TASKS_PATH
#: The class, the first of these the task file has (else every class): the lookup set's,
#: then the starter set's short factual answers (a user's `--tasks` file).
OFFLINE_CLASSES: tuple[str, ...] = ("agent-lookup", "extraction")
#: A 90 % tolerance: a provisional verdict needs 10 tasks with graded pairs (95 %: 20).
OFFLINE_TOLERANCE = 0.9
#: Tasks beyond what the evidence rule needs (`tasks_for_provisional`): a task whose
#: cleartext or compressed answer is cut off at max_tokens, or whose cleartext answer
#: grades 0, drops out of that arm's count.
OFFLINE_SPARE_TASKS = 4
OFFLINE_REPEATS = 1
#: The gentlest rung and a lossy one: the walk stops at the first that fails.
OFFLINE_METHODS: tuple[str, ...] = ("safe", "prune")
OFFLINE_RATES: tuple[float, ...] = (0.6,)
#: On tasks with tool results the text arms change nothing (they leave tool output alone),
#: so the class's ladder is the gentlest tool-output rung, walked as the class's own arm
#: (too few tasks per kind of output for a per-kind walk). One arm: on the lookup set a
#: second (`elide@0.7`) took the run from about 330 to 480 CPU-seconds.
OFFLINE_TOOL_METHODS: tuple[str, ...] = ("ext:tools-lossless",)
#: Kept for a run that asks for tool rungs per kind (`--tool-rungs` unset, text arms given).
OFFLINE_TOOL_RUNGS: tuple[str, ...] = ("lossless", "elide@0.7")
#: A single looked-up value is a sentence; a longer cap only pays for answers that ramble.
OFFLINE_MAX_TOKENS = 64
#: Greedy decoding. Sampled at temperature 1 (or even 0.3) a small model's two cleartext
#: answers to one prompt grade far apart (SmolLM2: control losses of 30-80 % measured),
#: which refuses the class as unmeasurable; greedy, the two are the same text and the
#: control measures what remains (the judge, deterministic here): the floor reads 0.
OFFLINE_TEMPERATURE = 0.0


@dataclass(frozen=True)
class OfflineScope:
    """An offline run's settings, what the offline defaults chose, and how to widen each."""

    config: CalibrationConfig
    chosen: tuple[str, ...] = ()

    def banner(self) -> str:
        """The lines printed before the run (empty when nothing was narrowed)."""
        if not self.chosen:
            return ""
        return (
            "Offline default scope (the local model takes seconds per answer on 2 cores): "
            + "; ".join(self.chosen)
            + ". Options you pass are kept as given."
        )


def offline_scope(config: CalibrationConfig, *, explicit: Iterable[str] = ()) -> OfflineScope:
    """Narrow an offline (local-model) run to a scope that can decide, in minutes.

    A setting is left alone when it is in `explicit` (the CLI's options the user passed) or
    differs from the default. Online runs are returned unchanged.
    """
    if config.resolved_backend() != "local":
        return OfflineScope(config)
    from tokenlens.decision.evidence import tasks_for_provisional
    from tokenlens.fidelity import tool_outputs

    given = set(explicit) | set(config.model_fields_set)
    default = CalibrationConfig.model_validate({})
    updates: dict[str, object] = {}
    notes: list[str] = []
    # Classes named on their own are the starter set's (`--classes extraction`, `all`).
    lookup = not {"tasks", "classes"} & given and config.tasks == default.tasks
    if lookup:
        updates["tasks"] = OFFLINE_TASKS
        notes.append(
            "the lookup set: one value read from a short tool output (widen: --tasks "
            "tasks_data/agent, or tasks_data/starter)"
        )
    tasks_path = OFFLINE_TASKS if lookup else config.tasks
    if config.classes is None and "classes" not in given:
        present = {task.task_class for task in load_tasks(tasks_path)}
        chosen = next((name for name in OFFLINE_CLASSES if name in present), None)
        if chosen is not None:
            updates["classes"] = (chosen,)
            notes.append(
                f"class {chosen}" + ("" if lookup else " (widen: --classes all, or a list)")
            )
    tolerance = config.tolerance
    if "tolerance" not in given:
        tolerance = updates["tolerance"] = OFFLINE_TOLERANCE
        notes.append(
            f"tolerance {OFFLINE_TOLERANCE:.0%} (--tolerance 0.95 needs "
            f"{tasks_for_provisional(0.95)} tasks with graded pairs)"
        )
    if config.max_tasks_per_class is None:
        need = tasks_for_provisional(tolerance)
        count = need + OFFLINE_SPARE_TASKS
        updates["max_tasks_per_class"] = count
        # The lookup set's own order mixes its questions; another file's shortest are cheapest.
        updates["shortest_tasks_first"] = not lookup
        which = "first" if lookup else "shortest"
        notes.append(
            f"its {count} {which} tasks (a verdict needs {need} with graded pairs; widen: "
            "--max-tasks-per-class N)"
        )
    if "repeats" not in given:
        updates["repeats"] = OFFLINE_REPEATS
        notes.append(f"{OFFLINE_REPEATS} repeat (widen: --repeats 3)")
    scoped = config.model_copy(update=updates)
    with_tools = any(
        task.body is not None and tool_outputs(task.body) for task in scoped.selected_tasks()
    )
    if config.methods == default.methods and config.rates == default.rates:
        if with_tools and config.tool_rungs is None and "tool_rungs" not in given:
            updates["methods"], updates["tool_rungs"] = OFFLINE_TOOL_METHODS, ()
            ladder = " then ".join(OFFLINE_TOOL_METHODS)
            notes.append(
                f"arm {ladder} (widen: --methods ext:tools-lossless,ext:tools-elide@0.9,"
                "ext:tools-elide@0.7)"
            )
        else:
            updates["methods"], updates["rates"] = OFFLINE_METHODS, OFFLINE_RATES
            ladder = " then ".join(
                f"{m}@{OFFLINE_RATES[0]:g}" if m in ("prune", "select") else m
                for m in OFFLINE_METHODS
            )
            notes.append(f"arms {ladder} (widen: --methods safe,minify,prune --rates 0.8,0.6)")
    unset_rungs = config.tool_rungs is None and "tool_rungs" not in given
    if with_tools and unset_rungs and "tool_rungs" not in updates:
        updates["tool_rungs"] = OFFLINE_TOOL_RUNGS
        notes.append(
            f"tool-output rungs {' then '.join(OFFLINE_TOOL_RUNGS)} (widen: --tool-rungs "
            "lossless,elide@0.9,elide@0.7,elide@0.5)"
        )
    if "max_tokens" not in given:
        updates["max_tokens"] = OFFLINE_MAX_TOKENS
        notes.append(f"answers up to {OFFLINE_MAX_TOKENS} tokens (--max-tokens N)")
    # The design stays the fixed one (every cell paid): the sequential design stops an arm
    # that fails early after a handful of tasks (a futility stop), and then reports the
    # class as short of tasks rather than as harmed by compression.
    if "temperature" not in given:
        updates["temperature"] = OFFLINE_TEMPERATURE
        notes.append(
            "greedy answers, so the control's noise floor reads 0 (sample: --temperature 1)"
        )
    if "judge" not in given:  # kept: an LLM judgement costs several answers' time offline
        notes.append(
            "graded by the fact grader, or the reference metric for tasks without facts "
            "(the model as blind judge too: --judge both)"
        )
    if not updates:
        return OfflineScope(config)
    return OfflineScope(config.model_copy(update=updates), tuple(notes))

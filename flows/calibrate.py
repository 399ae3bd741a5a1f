"""The `calibrate` Prefect flow: thin orchestration of `tokenlens.calibration.stages`.

Caching: the stage tasks use `NO_CACHE` on purpose. What must never be paid twice is
each model call, and the call ledger (`tokenlens.ledger`) keys those by content hash;
compressed bodies are reused by their own content key. Prefect's default policy
(RUN_ID) would never hit across runs, and TASK_SOURCE would throw paid work away on a
comment edit, so Prefect holds no cache here: the ledger is the source of truth.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NO_CACHE

from tokenlens.calibration import stages
from tokenlens.calibration.progress import FanOut, RichProgress
from tokenlens.calibration.runner import Progress
from tokenlens.calibration.session import (
    estimate_spend,
    offline_defaults,
    open_calibration,
)
from tokenlens.calibration.stages import Calibration, Published, Row
from tokenlens.calibration.summary import curve_records, spend_text
from tokenlens.config import CalibrationConfig
from tokenlens.decision import Curve
from tokenlens.errors import SpendLimitReached
from tokenlens.report import seed_lines
from tokenlens.tasks import CalibrationTask

#: Stable artifact keys (lowercase letters, digits, dashes).
KEY_PROGRESS = "calibration-progress"
KEY_CURVE = "calibration-curve"
KEY_POLICY = "calibration-policy"
KEY_SPEND = "calibration-spend"
KEY_REPORT = "calibration-report"
KEY_TABLE = "calibration-table-{name}"

_STAGE_OPTIONS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}


class ArtifactProgress:
    """A Prefect progress artifact per run, updated at most every half second."""

    def __init__(self) -> None:
        self._id: UUID | None = None
        self._last = 0.0
        self._weights = {"compress": (0.0, 0.1), "sample": (0.1, 0.6), "judge": (0.7, 0.3)}

    def _percent(self, stage: str, done: int, total: int) -> float:
        start, width = self._weights.get(stage, (0.0, 0.0))
        return round(100 * (start + width * (done / total if total else 1.0)), 1)

    def start(self, stage: str, total: int) -> None:
        percent = self._percent(stage, 0, total)
        if self._id is None:
            created = create_progress_artifact(
                progress=percent,
                key=KEY_PROGRESS,
                description="Share of the calibration's work done (compress, sample, judge).",
            )
            self._id = cast(UUID, created)  # sync call: async_dispatch returns the value
        else:
            update_progress_artifact(self._id, percent)

    def advance(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if self._id is not None and (now - self._last > 0.5 or done == total):
            self._last = now
            update_progress_artifact(self._id, self._percent(stage, done, total))

    def finish(self, stage: str) -> None:
        if self._id is not None:
            update_progress_artifact(self._id, self._percent(stage, 1, 1))


@task(**_STAGE_OPTIONS)
def load_tasks(cal: Calibration, tasks: list[CalibrationTask]) -> list[Row]:
    """Record the run's tasks (selected from the task file) as the tasks table."""
    return stages.load_stage(cal.config, cal.store, tasks, cal.model)


@task(**_STAGE_OPTIONS)
def compress_arms(cal: Calibration, tasks: list[CalibrationTask]) -> list[Row]:
    """Compress every task with every arm of the ladder (reusing stored bodies)."""
    return stages.compress_stage(cal, tasks)


@task(**_STAGE_OPTIONS)
def sample_answers(
    cal: Calibration, tasks: list[CalibrationTask], compressions: list[Row]
) -> list[Row]:
    """Obtain the cleartext, control and compressed answers (ledger first)."""
    return stages.sample_stage(cal, tasks, compressions)


@task(**_STAGE_OPTIONS)
def judge_pairs(
    cal: Calibration, tasks: list[CalibrationTask], compressions: list[Row], answers: list[Row]
) -> list[Row]:
    """Grade each (cleartext, second answer) pair with the configured judges."""
    return stages.judge_stage(cal, tasks, compressions, answers)


@task(**_STAGE_OPTIONS)
def aggregate(cal: Calibration, grades: list[Row]) -> Curve:
    """Turn grades into the per-class quality curve of the deciding judge."""
    return stages.aggregate_stage(cal, grades)


@task(**_STAGE_OPTIONS)
def publish_policy(
    cal: Calibration,
    curve: Curve,
    grades: list[Row],
    requested: list[str] | None,
    unavailable: dict[str, str],
) -> Published:
    """Decide the policy per class and publish it with the report."""
    return stages.publish_stage(cal, curve, grades, requested, unavailable)


@flow(name="calibrate", log_prints=True)
def calibrate(config: CalibrationConfig | None = None) -> dict[str, Any]:
    """Calibrate the compression ladder against answer quality and publish a policy."""
    config = config or CalibrationConfig()
    progress: Progress = ArtifactProgress()
    terminal = _terminal_progress()
    if terminal is not None:
        progress = FanOut([progress, terminal])
    try:
        return _calibrate(config, progress)
    finally:
        if terminal is not None:
            terminal.close()


def _calibrate(config: CalibrationConfig, progress: Progress) -> dict[str, Any]:
    logger = get_run_logger()
    cal, selected = open_calibration(config, progress=progress)
    logger.info(
        "calibration %s: %d tasks, %d arms + control, %d repeats, model %s (%s), judge %s",
        cal.store.run_id,
        len(selected),
        len(cal.arms),
        config.repeats,
        cal.model,
        cal.backend,
        config.judge,
    )
    load_tasks(cal, selected)
    compressions = compress_arms(cal, selected)
    unavailable = stages.unavailable_arms(compressions)
    for arm, reason in unavailable.items():
        logger.warning("arm %s is unavailable here and was not measured: %s", arm, reason)
    estimate = estimate_spend(cal, selected, compressions).describe()
    logger.info("spend estimate: %s", estimate)
    try:
        answers = sample_answers(cal, selected, compressions)
        grades = judge_pairs(cal, selected, compressions, answers)
    except SpendLimitReached:
        _publish_spend(cal, estimate)
        raise
    curve = aggregate(cal, grades)
    requested = list(config.classes) if config.classes else None
    published = publish_policy(cal, curve, grades, requested, unavailable)
    lines = seed_lines(published.policy)
    _publish_artifacts(cal, curve, published, lines, estimate)
    return {
        "calibration_id": cal.store.run_id,
        "policy_path": str(published.policy_path),
        "report_path": str(published.report_path),
        "store": str(cal.store.run_dir),
        "ledger": str(cal.ledger.calls_path),
        "exit_code": published.exit_code,
        "policy_lines": lines,
        "unavailable_arms": unavailable,
        "new_calls": cal.spend.new_calls,
        "spent_usd": cal.spend.spent,
        "estimate": estimate,
    }


def _terminal_progress() -> RichProgress | None:
    return RichProgress() if sys.stderr.isatty() else None


def _publish_spend(cal: Calibration, estimate: str) -> None:
    create_markdown_artifact(
        markdown="## Spend\n\n" + spend_text(cal.spend, estimate).replace("\n", "\n\n"),
        key=KEY_SPEND,
        description="What this calibration run cost (estimate, then actual).",
    )


def _publish_artifacts(
    cal: Calibration, curve: Curve, published: Published, lines: list[str], estimate: str
) -> None:
    create_table_artifact(
        table=curve_records(curve),
        key=KEY_CURVE,
        description=f"Quality curve per class and arm (judge: {curve.judge}).",
    )
    policy = published.policy
    markdown = [
        f"## Policy {policy.calibration_id}",
        "",
        f"Model `{policy.model}`, judge `{policy.judge}`, tolerance {policy.tolerance:.0%}, "
        f"mode `{policy.mode}`.",
        "",
        "```",
        *lines,
        "```",
        "",
        "Why:",
        "",
        *[
            f"- **{entry.task_class}** {entry.mark} {entry.reason}"
            for entry in [*policy.classes.values(), policy.default]
        ],
        "",
        f"Policy file: `{published.policy_path}`",
    ]
    unavailable = stages.unavailable_arms(cal.store.read("compressions"))
    if unavailable:
        markdown += ["", "Arms not measured here:"]
        markdown += [f"- `{arm}`: {reason}" for arm, reason in unavailable.items()]
    create_markdown_artifact(
        markdown="\n".join(markdown),
        key=KEY_POLICY,
        description="The published policy: ✓ measured, ? provisional, — none.",
    )
    for name, path in cal.store.existing().items():
        create_link_artifact(
            link=Path(path).resolve().as_uri(),
            link_text=f"{name}.parquet",
            key=KEY_TABLE.format(name=name),
            description=f"The {name} table of calibration {cal.store.run_id} (Parquet).",
        )
    create_link_artifact(
        link=Path(published.report_path).resolve().as_uri(),
        link_text="HTML report",
        key=KEY_REPORT,
        description="The calibration report.",
    )
    _publish_spend(cal, estimate)


def run_calibration(config: CalibrationConfig) -> int:
    """`tokenlens calibrate`: run the flow in-process, print the policy; return the exit code."""
    for noisy in ("httpx", "httpcore"):  # one line per Prefect API request otherwise
        logging.getLogger(noisy).setLevel(logging.WARNING)
    config, notes = offline_defaults(config)
    if notes:
        print(
            "Offline default run (the embedded model takes seconds per answer): "
            + "; ".join(notes)
            + ".",
            file=sys.stderr,
        )
    try:
        result = calibrate(config)
    except SpendLimitReached as exc:
        print(f"tokenlens: {exc}", file=sys.stderr)
        return exc.exit_code
    print()
    for line in result["policy_lines"]:
        print(line)
    print()
    for arm, reason in result["unavailable_arms"].items():
        print(f"not measured here: {arm} ({reason})")
    print(f"policy:  {result['policy_path']}")
    print(f"report:  {result['report_path']}")
    print(f"tables:  {result['store']}")
    print(f"ledger:  {result['ledger']} ({result['new_calls']} new calls this run)")
    print(f"spend:   ${result['spent_usd']:.4f} this run; {result['estimate']}")
    return int(result["exit_code"])

"""The `calibrate` Prefect flow: thin orchestration of `tokenlens.calibration.stages`.

Caching: the stage tasks use `NO_CACHE` on purpose. What must never be paid twice is
each model call, and the call ledger (`tokenlens.ledger`) keys those by content hash;
compressed bodies are reused by their own content key. Prefect's default policy
(RUN_ID) would never hit across runs, and TASK_SOURCE would throw paid work away on a
comment edit, so Prefect holds no cache here: the ledger is the source of truth.

Why one file past 400 lines: a third of it is the flow's signature, every setting a
top-level parameter with its description (what the UI's "Custom run" form shows), and the
deployment loads this file by path (`flows/calibrate.py:calibrate`), so the artifact
helpers stay beside the flow rather than in a sibling module the worker may not import.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Literal, TypeVar, cast
from uuid import UUID

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import opaque

from tokenlens.calibration import stages
from tokenlens.calibration.carry import publish_carried
from tokenlens.calibration.fanout import FanOutSettings, pay_with_shards
from tokenlens.calibration.progress import FanOut, LineProgress, RichProgress
from tokenlens.calibration.result import CalibrationResult, ShardRun
from tokenlens.calibration.rounds import RoundsResult, rounds_markdown, rounds_stage
from tokenlens.calibration.runner import Progress
from tokenlens.calibration.runs import finish_run
from tokenlens.calibration.session import (
    estimate_spend,
    open_calibration,
)
from tokenlens.calibration.shards import reopen_ledger
from tokenlens.calibration.stages import Calibration, Published
from tokenlens.calibration.summary import (
    curve_records,
    report_artifact,
    spend_line,
    spend_text,
    table_cell,
    trend_markdown,
    where_markdown,
)
from tokenlens.config import (
    DEFAULT_LLMLINGUA_MODEL,
    DEFAULT_MAX_POLICY_AGE_DAYS,
    DEFAULT_METHODS,
    DEFAULT_RATES,
    DEFAULT_REPORTS,
    DEFAULT_STORE,
    Backend,
    CalibrationConfig,
    DecisionMode,
    JudgeKind,
)
from tokenlens.decision import Curve
from tokenlens.decision.sequential import RoundSummary
from tokenlens.errors import CalibrationUnresolved, SpendLimitReached, TokenLensError
from tokenlens.report import policy_markdown, seed_lines
from tokenlens.tables import AnswerRow, CompressionRow, GradeRow, TaskRow
from tokenlens.tasks import DEFAULT_TASKS_PATH, CalibrationTask

#: Stable artifact keys (lowercase letters, digits, dashes).
KEY_PROGRESS = "calibration-progress"
KEY_CURVE = "calibration-curve"
KEY_POLICY = "calibration-policy"
KEY_SPEND = "calibration-spend"
KEY_REPORT = "calibration-report"
KEY_TREND = "calibration-trend"
KEY_ROUNDS = "calibration-rounds"

_STAGE_OPTIONS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}

T = TypeVar("T")


def _as_is(value: T) -> T:
    """A stage task's argument, handed over without Prefect walking into it (`opaque`).

    Prefect visits every element of a task's arguments twice, looking for futures to
    resolve and upstream runs to record: ~10,000 visits per stage in the bench for the
    rows and the run's context, which hold no futures. `opaque` still links the value
    itself to the task run that returned it (the flow run's graph keeps its edges)."""
    return cast(T, opaque(value))


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
def load_tasks(cal: Calibration, tasks: list[CalibrationTask]) -> list[TaskRow]:
    """Record the run's tasks (selected from the task file) as the tasks table."""
    return stages.load_stage(cal.config, cal.store, tasks, cal.model)


@task(**_STAGE_OPTIONS)
def compress_arms(cal: Calibration, tasks: list[CalibrationTask]) -> list[CompressionRow]:
    """Compress every task with every arm of the ladder (reusing stored bodies)."""
    return stages.compress_stage(cal, tasks)


@task(**_STAGE_OPTIONS)
def sample_answers(
    cal: Calibration, tasks: list[CalibrationTask], compressions: list[CompressionRow]
) -> list[AnswerRow]:
    """Obtain the cleartext, control and compressed answers (ledger first)."""
    return stages.sample_stage(cal, tasks, compressions)


@task(**_STAGE_OPTIONS)
def judge_pairs(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    answers: list[AnswerRow],
) -> list[GradeRow]:
    """Grade each (cleartext, second answer) pair with the configured judges."""
    return stages.judge_stage(cal, tasks, compressions, answers)


@task(**_STAGE_OPTIONS)
def sample_in_rounds(
    cal: Calibration, tasks: list[CalibrationTask], compressions: list[CompressionRow]
) -> RoundsResult:
    """Sample and judge in rounds until every arm's verdict is settled (sequential design)."""
    logger = get_run_logger()
    asked = 0

    def report(summary: RoundSummary) -> None:
        nonlocal asked
        asked += summary.cells
        text = rounds_markdown(summary, asked)
        logger.info("round %d: %d new pairs asked (%d so far)", summary.round, summary.cells, asked)
        create_markdown_artifact(
            key=KEY_ROUNDS, markdown=text, description=f"Sequential round {summary.round}"
        )

    result = rounds_stage(cal, tasks, compressions, on_round=report)
    saved = 1 - _paid_calls(result) / result.fixed_calls if result.fixed_calls else 0.0
    create_markdown_artifact(
        key=KEY_ROUNDS,
        markdown=rounds_markdown(result.rounds[-1], asked, saved=saved) if result.rounds else "",
        description="Sequential design: final round",
    )
    return result


def _paid_calls(result: RoundsResult) -> int:
    clear = {(r["task_id"], r["replicate"]) for r in result.answers if r["arm"] == "clear"}
    return len(clear) + 2 * result.asked_pairs


@task(**_STAGE_OPTIONS)
def pay_in_shards(
    cal: Calibration, tasks: list[CalibrationTask], fan_out: FanOutSettings
) -> list[ShardRun]:
    """Pay for every answer and judge call in shards run by the pool's workers."""
    return pay_with_shards(cal, tasks, fan_out, log=get_run_logger())


@task(**_STAGE_OPTIONS)
def aggregate(cal: Calibration, grades: list[GradeRow]) -> Curve:
    """Turn grades into the per-class quality curve of the deciding judge."""
    return stages.aggregate_stage(cal, grades)


@task(**_STAGE_OPTIONS)
def publish_policy(
    cal: Calibration,
    curve: Curve,
    grades: list[GradeRow],
    requested: list[str] | None,
    unavailable: dict[str, str],
    tasks: list[CalibrationTask] | None = None,
) -> Published:
    """Decide the policy per class, route it by predicted class, publish it with the report."""
    return stages.publish_stage(cal, curve, grades, requested, unavailable, tasks)


@flow(name="calibrate", log_prints=True)
def calibrate(
    tasks: Path = DEFAULT_TASKS_PATH,
    classes: list[str] | None = None,
    max_tasks_per_class: int | None = None,
    shortest_tasks_first: bool = False,
    methods: list[str] = list(DEFAULT_METHODS),  # noqa: B006 - Prefect shows it in the form
    rates: list[float] = list(DEFAULT_RATES),  # noqa: B006
    repeats: int = 3,
    backend: Backend = "auto",
    model: str | None = None,
    max_tokens: int = 512,
    temperature: float = 1.0,
    judge: JudgeKind = "metric",
    judge_model: str | None = None,
    judge_both_orders: bool = False,
    judge_twice: bool = False,
    tolerance: float = 0.95,
    mode: DecisionMode = "interval",
    concurrency: int = 4,
    max_spend: float | None = None,
    batch: bool = False,
    design: Literal["fixed", "sequential"] = "fixed",
    store: str = DEFAULT_STORE,
    reports: str = DEFAULT_REPORTS,
    llmlingua_model: str = DEFAULT_LLMLINGUA_MODEL,
    seed: int = 0,
    max_policy_age: float | None = DEFAULT_MAX_POLICY_AGE_DAYS,
    fresh_sample: bool = False,
    fail_on_unresolved: bool = True,
    resume: str | None = None,
    shards: int | None = None,
    shard_deployment: str = "calibrate-shard/shard",
    calls_limit: int | None = None,
    shard_lost_after: float = 600.0,
) -> CalibrationResult:
    """Calibrate the compression ladder against answer quality and publish a policy.

    Every setting is its own parameter, so one can be overridden
    (`prefect deployment run calibrate/nightly --param repeats=5`) and the deployment's
    others are kept.

    Args:
        tasks: JSONL task file (on the worker).
        classes: task classes to calibrate; empty for every class in the file.
        max_tasks_per_class: cap on tasks per class; empty for all.
        shortest_tasks_first: with a cap, keep each class's shortest tasks.
        methods: ladder methods, gentlest first (safe, minify, dedup, prune, select, llmlingua2).
        rates: keep fractions of the rate-taking methods, e.g. [0.8, 0.6, 0.4].
        repeats: answer pairs per task and arm.
        backend: anthropic, local, or auto (anthropic when ANTHROPIC_API_KEY is set).
        model: answer model; empty for the backend's default.
        max_tokens: answer length cap in tokens.
        temperature: sampling temperature of the answers.
        judge: metric (no model), llm (blind LLM judge) or both.
        judge_model: model of the LLM judge; empty for the answer model.
        judge_both_orders: judge each pair in both A/B orders.
        judge_twice: re-judge control pairs to split the noise floor.
        tolerance: retention an arm must keep (0-1).
        mode: interval (the 95% bound must clear) or mean (the seed's rule).
        concurrency: model calls in flight.
        max_spend: USD cap for this run's new calls; empty for none.
        batch: use the Message Batches API (half price, slower).
        design: fixed (every cell up front) or sequential (rounds; pay only until each
            arm's verdict is settled).
        store: root of the Parquet tables, run manifests and the call ledger: a folder on
            the worker or a URL such as s3://bucket/prefix/store.
        reports: root of the published policies and reports (folder or URL).
        llmlingua_model: LLMLingua-2 model (hub name or local path).
        seed: sample seed of a run that does not ask for a fresh sample.
        max_policy_age: days a certified policy entry stays in force unless a run
            re-certifies it; a run that cannot measure a class carries its last entry
            over until then; empty for no limit.
        fresh_sample: draw new answer seeds for this run (a schedule sees drift); off, a
            rerun reuses every paid call.
        fail_on_unresolved: end the flow run Failed (after publishing) when a requested
            class is unmeasurable, had no arm hold, or has too few tasks.
        resume: a run id to resume with its own seeds ("latest": the newest unfinished run);
            the other settings then come from that run.
        shards: split the paid work into this many shards, each a flow run of
            `shard_deployment` that any worker of its pool may take; empty: this process
            pays for everything (the default).
        shard_deployment: the deployment that runs one shard ("flow/deployment").
        calls_limit: with shards, model calls in flight across all workers, per model (the
            Prefect global concurrency limit tokenlens-calls-<model>, created or resized);
            empty: leave any existing limit as it is.
        shard_lost_after: seconds without a heartbeat after which a running shard's worker
            counts as gone (the shard is marked Crashed and the run fails naming it).
    """
    config = CalibrationConfig(
        tasks=tasks,
        classes=tuple(classes) if classes else None,
        max_tasks_per_class=max_tasks_per_class,
        shortest_tasks_first=shortest_tasks_first,
        methods=tuple(methods),
        rates=tuple(rates),
        repeats=repeats,
        backend=backend,
        model=model,
        max_tokens=max_tokens,
        temperature=temperature,
        judge=judge,
        judge_model=judge_model,
        judge_both_orders=judge_both_orders,
        judge_twice=judge_twice,
        tolerance=tolerance,
        mode=mode,
        concurrency=concurrency,
        max_spend=max_spend,
        batch=batch,
        design=design,
        store=store,
        reports=reports,
        llmlingua_model=llmlingua_model,
        seed=seed,
        max_policy_age=max_policy_age,
    )
    fan_out = None
    if shards is not None:
        if shards < 1:
            raise TokenLensError(f"shards: at least 1 (or empty for no shards), got {shards}")
        fan_out = FanOutSettings(shards, shard_deployment, calls_limit, shard_lost_after)
        if design == "sequential":
            raise TokenLensError(
                "shards: the sequential design decides each round from every task's grades; "
                "run it without shards (or use design=fixed)"
            )
    progress: Progress = ArtifactProgress()
    terminal = _terminal_progress()
    progress = FanOut([progress, terminal])
    try:
        result = _calibrate(
            config, progress, fresh_sample=fresh_sample, resume=resume, fan_out=fan_out
        )
    finally:
        if isinstance(terminal, RichProgress):
            terminal.close()
    unresolved = result.unresolved_classes
    if fail_on_unresolved and unresolved:
        raise CalibrationUnresolved(unresolved, result.run_id, result.report_path)
    return result


def flow_parameters(config: CalibrationConfig, **options: Any) -> dict[str, Any]:
    """The flow's parameters for a config (plus `fresh_sample`, `resume`, ...)."""
    params = config.model_dump(mode="json")
    params["classes"] = list(config.classes) if config.classes else None
    return {**params, **options}


def _calibrate(
    config: CalibrationConfig,
    progress: Progress,
    *,
    fresh_sample: bool,
    resume: str | None,
    fan_out: FanOutSettings | None = None,
) -> CalibrationResult:
    logger = get_run_logger()
    cal, selected = open_calibration(
        config,
        progress=progress,
        fresh_sample=fresh_sample,
        resume=resume,
        flow_run_id=_flow_run_id(),
    )
    config = cal.config
    logger.info(
        "calibration %s, run %s (sample seed %d%s): %d tasks, %d arms + control, %d repeats, "
        "model %s (%s), judge %s",
        cal.calibration_id,
        cal.store.run_id,
        config.seed,
        ", fresh" if fresh_sample else "",
        len(selected),
        len(cal.arms),
        config.repeats,
        cal.model,
        cal.backend,
        config.judge,
    )
    try:
        load_tasks(_as_is(cal), _as_is(selected))
        compressions = compress_arms(_as_is(cal), _as_is(selected))
        unavailable = stages.unavailable_arms(compressions)
        for arm, reason in unavailable.items():
            logger.warning("arm %s is unavailable here and was not measured: %s", arm, reason)
        estimate = estimate_spend(cal, selected, compressions).describe()
        logger.info("spend estimate: %s", estimate)
        shard_runs: list[ShardRun] = []
        if fan_out is not None:
            shard_runs = pay_in_shards(cal, selected, fan_out)
            cal = reopen_ledger(cal)  # the parent now finds every call the shards paid for
        try:
            if config.design == "sequential":
                rounds = sample_in_rounds(_as_is(cal), _as_is(selected), _as_is(compressions))
                grades, curve = rounds.grades, rounds.curve
            else:
                answers = sample_answers(_as_is(cal), _as_is(selected), _as_is(compressions))
                grades = judge_pairs(
                    _as_is(cal), _as_is(selected), _as_is(compressions), _as_is(answers)
                )
        except SpendLimitReached as exc:
            _publish_spend(cal, estimate)
            carried = publish_carried(config, cal.store.run_id, f"run stopped unmeasured: {exc}")
            if carried is not None:
                logger.warning("the policy in force stays, carried over: %s", carried)
            raise
        if fan_out is not None and cal.spend.new_calls:
            logger.warning(
                "the shards left %d calls unpaid (failed calls, or an arm a worker could "
                "not compress); this process paid for them",
                cal.spend.new_calls,
            )
        if config.design != "sequential":
            curve = aggregate(_as_is(cal), _as_is(grades))
        requested = list(config.classes) if config.classes else None
        published = publish_policy(
            _as_is(cal), _as_is(curve), _as_is(grades), requested, unavailable, _as_is(selected)
        )
    except BaseException:
        if cal.run is not None:
            finish_run(config.store, cal.run, "stopped")
        raise
    if cal.run is not None:
        finish_run(config.store, cal.run, "finished")
    lines = seed_lines(published.policy)
    _publish_artifacts(cal, curve, published, lines, estimate)
    return CalibrationResult(
        calibration_id=cal.calibration_id,
        run_id=cal.store.run_id,
        seed=config.seed,
        policy_path=str(published.policy_path),
        report_path=str(published.report_path),
        store=cal.store.run_dir.url,
        ledger=str(cal.ledger.calls_path),
        exit_code=published.exit_code,
        unresolved_classes=list(published.unresolved),
        policy_lines=lines,
        unavailable_arms=unavailable,
        new_calls=cal.spend.new_calls,
        spend_line=spend_line(cal.spend),
        spent_usd=cal.spend.spent,
        estimate=estimate,
        shards=shard_runs,
    )


def _flow_run_id() -> str | None:
    """The Prefect flow run's id: a retry of the same flow run resumes the same run."""
    from prefect.runtime import flow_run

    value = flow_run.get_id()
    return str(value) if value else None


def _terminal_progress() -> Progress:
    """A bar on a terminal; plain progress lines every 30 s anywhere else."""
    return RichProgress() if sys.stderr.isatty() else LineProgress()


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
        description=f"Quality curve per class and arm, ladder order (judge: {curve.judge}).",
    )
    policy = published.policy
    markdown = [
        f"## Policy of run {cal.store.run_id}",
        "",
        f"Calibration `{policy.calibration_id}`, model `{policy.model}`, judge "
        f"`{policy.judge}`, tolerance {policy.tolerance:.0%}, mode `{policy.mode}`.",
        "",
        *policy_markdown(lines),
        "",
        "Why:",
        "",
        *[
            f"- **{table_cell(entry.task_class)}** {entry.mark} {entry.reason}"
            for entry in [*policy.classes.values(), policy.default]
        ],
        "",
        where_markdown("Policy file", published.policy_path) + ".",
    ]
    stored = cast(list[CompressionRow], cal.store.read("compressions"))
    unavailable = stages.unavailable_arms(stored)
    if unavailable:
        markdown += ["", "Arms not measured here:"]
        markdown += [f"- `{arm}`: {reason}" for arm, reason in unavailable.items()]
    create_markdown_artifact(
        markdown="\n".join(markdown),
        key=KEY_POLICY,
        description="The published policy: ✓ measured, ? provisional, — none.",
    )
    create_markdown_artifact(
        markdown=report_artifact(published, tables_dir=cal.store.run_dir.url),
        key=KEY_REPORT,
        description="The calibration report (verdicts, per-class table, noise floors, plot).",
    )
    create_markdown_artifact(
        markdown=trend_markdown(str(cal.config.store), str(cal.config.reports)),
        key=KEY_TREND,
        description="Per class over the last runs: verdict, arm, retention, noise floor.",
    )
    _publish_spend(cal, estimate)

"""The `calibrate` Prefect flow: thin orchestration of `tokenlens.calibration.stages`.

Caching: the stage tasks use `NO_CACHE` on purpose. What must never be paid twice is
each model call, and the call ledger (`tokenlens.ledger`) keys those by content hash;
compressed bodies are reused by their own content key. Prefect's default policy
(RUN_ID) would never hit across runs, and TASK_SOURCE would throw paid work away on a
comment edit, so Prefect holds no cache here: the ledger is the source of truth.

The flow's parameters are `CalibrateParams`'s fields, one top-level parameter each
(`tokenlens.calibration.params` says why not one model parameter); its artifacts are
`tokenlens.calibration.artifacts`.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar, cast

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture
from prefect.states import Cancelled
from prefect.utilities.annotations import opaque

from tokenlens.calibration import stages
from tokenlens.calibration.artifacts import (
    KEY_CURVE,
    KEY_POLICY,
    KEY_PROGRESS,
    KEY_REPORT,
    KEY_ROUNDS,
    KEY_RUN,
    KEY_SPEND,
    KEY_TREND,
    ArtifactProgress,
    flow_run_id,
    publish_results,
    publish_spend,
    record_effective_parameters,
    run_spend,
)
from tokenlens.calibration.carry import publish_carried
from tokenlens.calibration.estimate import CallPlan
from tokenlens.calibration.fanout import FanOutSettings, ShardsCancelled, pay_with_shards
from tokenlens.calibration.params import CalibrateParams, flow_parameters, takes_fields
from tokenlens.calibration.progress import FanOut, LineProgress, RichProgress
from tokenlens.calibration.result import CalibrationResult, ShardRun
from tokenlens.calibration.rounds import RoundsResult, rounds_markdown, rounds_stage
from tokenlens.calibration.runner import Progress
from tokenlens.calibration.runs import finish_run
from tokenlens.calibration.session import estimate_spend, open_calibration
from tokenlens.calibration.shards import reopen_ledger
from tokenlens.calibration.stage_pay import Compressions
from tokenlens.calibration.stage_reanswer import Reanswered, reanswer_stage
from tokenlens.calibration.stages import Calibration, Published
from tokenlens.calibration.summary import spend_line
from tokenlens.calibration.warmup import warm_compression, warm_publishing
from tokenlens.decision import Curve
from tokenlens.decision.sequential import RoundSummary
from tokenlens.errors import CalibrationUnresolved, SpendLimitReached, UpstreamUnavailable
from tokenlens.ledger import LedgerView
from tokenlens.report import seed_lines
from tokenlens.tables import CompressionRow, GradeRow, TaskRow
from tokenlens.tasks import CalibrationTask

__all__ = [
    "KEY_CURVE",
    "KEY_POLICY",
    "KEY_PROGRESS",
    "KEY_REPORT",
    "KEY_ROUNDS",
    "KEY_RUN",
    "KEY_SPEND",
    "KEY_TREND",
    "calibrate",
    "flow_parameters",
]

_STAGE_OPTIONS: dict[str, Any] = {"cache_policy": NO_CACHE, "persist_result": False}

T = TypeVar("T")


def _as_is(value: T) -> T:
    """A stage task's argument, handed over without Prefect walking into it (`opaque`).

    Prefect visits every element of a task's arguments twice, looking for futures to
    resolve and upstream runs to record: ~10,000 visits per stage in the bench for the
    rows and the run's context, which hold no futures. `opaque` still links the value
    itself to the task run that returned it (the flow run's graph keeps its edges)."""
    return cast(T, opaque(value))


@task(**_STAGE_OPTIONS)
def load_tasks(cal: Calibration, tasks: list[CalibrationTask]) -> list[TaskRow]:
    """Record the run's tasks (selected from the task file) as the tasks table."""
    return stages.load_stage(cal.config, cal.store, tasks, cal.model)


@task(**_STAGE_OPTIONS)
def compress_arms(cal: Calibration, tasks: list[CalibrationTask]) -> list[CompressionRow]:
    """Compress every task with every arm of the ladder (reusing stored bodies)."""
    return stages.compress_stage(cal, tasks)


@task(**_STAGE_OPTIONS)
def answer_and_judge(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: Compressions,
    on_started: Callable[[], None] | None = None,
) -> stages.Paid:
    """Obtain the cleartext, control and compressed answers and grade each pair as soon as
    both its answers exist (ledger first; writes the answers and grades tables)."""
    return stages.pay_stage(cal, tasks, compressions, on_started=on_started)


@task(**_STAGE_OPTIONS)
def reanswer_disagreeing(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    paid: stages.Paid,
) -> Reanswered:
    """Pay more answers for the cells whose repeats disagree (`--reanswer`); rewrite the
    answers and grades tables with every row."""
    return reanswer_stage(cal, tasks, compressions, paid, log=get_run_logger().info)


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
        markdown=rounds_markdown(
            result.rounds[-1], asked, saved=saved, stops=result.stops_at_provisional
        )
        if result.rounds
        else "",
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
    notes: list[str] | None = None,
) -> Published:
    """Decide the policy per class, route it by predicted class, publish it with the report."""
    return stages.publish_stage(cal, curve, grades, requested, unavailable, tasks, notes=notes)


@flow(name="calibrate", log_prints=True)
@takes_fields(CalibrateParams)
def calibrate(**parameters: Any) -> CalibrationResult:
    """Calibrate the compression ladder against answer quality and publish a policy.

    Every setting is its own parameter, so one can be overridden
    (`prefect deployment run calibrate/nightly --param repeats=5`) and the deployment's
    others are kept. The parameters are `CalibrateParams`'s fields (listed below).
    """
    asked = CalibrateParams.model_validate(parameters)
    fan_out = None
    if asked.shards is not None:
        fan_out = FanOutSettings(
            asked.shards,
            asked.shard_deployment,
            asked.calls_limit,
            asked.shard_lost_after,
            asked.shard_retries,
        )
    artifact = ArtifactProgress()
    terminal = _terminal_progress()
    try:
        result = _calibrate(asked, FanOut([artifact, terminal]), fan_out=fan_out)
    except ShardsCancelled as exc:
        # Cancelled, not Failed: Prefect lets a Cancelling flow run end only Cancelled.
        # Returned as a state (a caller in-process gets Prefect's CancelledRun).
        return cast(CalibrationResult, Cancelled(message=str(exc)))
    finally:
        if isinstance(terminal, RichProgress):
            terminal.close()
    artifact.complete()
    unresolved = result.unresolved_classes
    if asked.fail_on_unresolved and unresolved:
        raise CalibrationUnresolved(unresolved, result.run_id, result.report_path)
    return result


def _calibrate(
    asked: CalibrateParams, progress: Progress, *, fan_out: FanOutSettings | None
) -> CalibrationResult:
    _on_the_side(warm_compression)  # while the run is opened and recorded
    cal, selected = open_calibration(
        asked.config(),
        progress=progress,
        fresh_sample=asked.fresh_sample,
        resume=asked.resume,
        flow_run_id=flow_run_id(),
    )
    try:
        return _run(asked, cal, selected, fan_out=fan_out)
    finally:
        cal.calls.close()


def _run(  # the run once opened: every stage, then the result
    asked: CalibrateParams,
    cal: Calibration,
    selected: list[CalibrationTask],
    *,
    fan_out: FanOutSettings | None,
) -> CalibrationResult:
    logger = get_run_logger()
    fresh_sample = asked.fresh_sample
    config = cal.config
    # Two round trips to the Prefect API, made beside the first stages, not before them.
    recorded = _on_the_side(record_effective_parameters, asked, cal)
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
    # The tasks table is written beside the first calls: nothing before publishing reads it.
    loaded = load_tasks.submit(_as_is(cal), _as_is(selected))
    try:
        # Compression runs beside the pay stage: the cleartext and control answers need no
        # compressed body, so they are asked meanwhile (the arms' join once it is done).
        compressing = _concurrent(compress_arms.submit(_as_is(cal), _as_is(selected)))
        side = _SideWork(cal, selected, compressing, logger)
        notes: list[str] = []  # the report's lines on re-answering (`--reanswer`)
        overlapped = fan_out is None and config.design != "sequential"
        if not overlapped:
            unavailable = _unavailable(compressing.result(), logger)
        shard_runs: list[ShardRun] = []
        if fan_out is not None:
            side.start()
            shard_runs = pay_in_shards(cal, selected, fan_out)
            cal = reopen_ledger(cal)  # the parent now finds every call the shards paid for
        try:
            if config.design == "sequential":
                side.start()
                rounds = sample_in_rounds(
                    _as_is(cal), _as_is(selected), _as_is(compressing.result())
                )
                grades, curve, notes = rounds.read, rounds.curve, rounds.notes
            else:
                paying: Compressions = compressing if overlapped else compressing.result()
                paid = answer_and_judge(
                    _as_is(cal), _as_is(selected), _as_is(paying), _as_is(side.start)
                )
                grades = paid.grades
                if overlapped:
                    unavailable = _unavailable(compressing.result(), logger)
                if config.reanswer:  # the curve reads the guarded rows; the tables hold all
                    reanswered = reanswer_disagreeing(
                        _as_is(cal), _as_is(selected), _as_is(compressing.result()), _as_is(paid)
                    )
                    grades, notes = reanswered.read, reanswered.notes(config.repeats)
        except (SpendLimitReached, UpstreamUnavailable) as exc:
            if isinstance(exc, UpstreamUnavailable):
                logger.error("the run stops, nothing measured: %s", exc)
            publish_spend(cal, side.estimate())
            carried = publish_carried(
                cal.config, cal.store.run_id, f"run stopped unmeasured: {exc}"
            )
            if carried is not None:
                logger.warning("the policy in force stays, carried over: %s", carried)
            raise
        if fan_out is not None and cal.calls.spend.new_calls:
            logger.warning(
                "the shards left %d calls unpaid (failed calls, or an arm a worker could "
                "not compress); this process paid for them",
                cal.calls.spend.new_calls,
            )
        loaded.result()
        if config.design != "sequential":
            curve = aggregate(_as_is(cal), _as_is(grades))
        requested = list(config.classes) if config.classes else None
        published = publish_policy(
            _as_is(cal),
            _as_is(curve),
            _as_is(grades),
            requested,
            unavailable,
            _as_is(selected),
            notes,
        )
    except BaseException:
        if cal.run is not None:
            finish_run(config.store, cal.run, "stopped")
        wait([recorded])  # a stopped run's summary is on it too when the flow ends
        loaded.wait()
        raise
    if cal.run is not None:
        finish_run(config.store, cal.run, "finished")
    estimate = side.estimate()
    lines = seed_lines(published.policy)
    publish_results(cal, curve, published, lines, estimate)
    recorded.result()
    spent = run_spend(cal)
    return CalibrationResult(
        calibration_id=cal.calibration_id,
        run_id=cal.store.run_id,
        seed=config.seed,
        policy_path=str(published.policy_path),
        report_path=str(published.report_path),
        store=cal.store.run_dir.url,
        ledger=str(cal.calls.ledger.calls_path),
        exit_code=published.exit_code,
        unresolved_classes=list(published.unresolved),
        policy_lines=lines,
        unavailable_arms=unavailable,
        new_calls=cal.calls.spend.new_calls,
        spend_line=spend_line(cal.calls.spend),
        spent_usd=cal.calls.spend.spent,
        run_calls=spent.calls,
        run_spent_usd=spent.usd,
        attempts=spent.attempts,
        in_flight_calls=spent.in_flight,
        estimate=estimate,
        shards=shard_runs,
    )


def _unavailable(compressions: list[CompressionRow], logger: Any) -> dict[str, str]:
    """The arms that could not run here, each logged as a warning."""
    unavailable = stages.unavailable_arms(compressions)
    for arm, reason in unavailable.items():
        logger.warning("arm %s is unavailable here and was not measured: %s", arm, reason)
    return unavailable


def _concurrent(running: PrefectFuture[T]) -> Future[T]:
    """A submitted task run's outcome as a plain `concurrent.futures.Future`: what the pay
    stage (which knows nothing of Prefect) waits on beside its calls."""
    outcome: Future[T] = Future()

    def copy(done: PrefectFuture[T]) -> None:
        try:
            outcome.set_result(done.result())
        except BaseException as exc:
            outcome.set_exception(exc)

    running.add_done_callback(copy)
    return outcome


class _SideWork:
    """What the run does while its calls are in flight: the spend estimate (from what the
    ledger held before paying, once the compressions are in; logged when ready) and
    loading what publishing needs (`warmup`). Started once the first calls are out, so it
    does not hold the interpreter while the stream is set up; `estimate()` starts it if
    nothing did."""

    def __init__(
        self,
        cal: Calibration,
        tasks: list[CalibrationTask],
        compressions: Future[list[CompressionRow]],
        logger: Any,
    ):
        self._plan_args = (cal, tasks, compressions, cal.calls.ledger.snapshot())
        self._logger = logger
        self._planned: Future[CallPlan] | None = None

    def start(self) -> None:
        if self._planned is not None:
            return
        self._planned = _on_the_side(_estimate, *self._plan_args)
        self._planned.add_done_callback(self._log)
        _on_the_side(warm_publishing)

    def estimate(self) -> str:
        """The spend estimate's line (waits for it)."""
        self.start()
        assert self._planned is not None
        return self._planned.result().describe()

    def _log(self, done: Future[CallPlan]) -> None:
        if done.exception() is None:
            self._logger.info("spend estimate: %s", done.result().describe())


def _estimate(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: Future[list[CompressionRow]],
    known: LedgerView,
) -> CallPlan:
    return estimate_spend(cal, tasks, compressions.result(), known)


def _on_the_side(fn: Callable[..., T], *args: Any) -> Future[T]:
    """`fn(*args)` on a thread of its own; the flow goes on (and reads the future later).

    It runs in a copy of the caller's context: Prefect keeps its settings (the temporary
    server's URL) and the run context in context variables, and a thread without them
    logging to the run started a second temporary server of its own.
    """
    side = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"side-{fn.__name__}")
    future = side.submit(contextvars.copy_context().run, fn, *args)
    side.shutdown(wait=False)
    return future


def _terminal_progress() -> Progress:
    """A bar on a terminal; anywhere else (a worker, a pipe, CI) a progress line every 10 s
    through the run's logger, so it is in the run's log (a deployment discards stderr)."""
    if sys.stderr.isatty():
        return RichProgress()
    return LineProgress(emit=get_run_logger().info)

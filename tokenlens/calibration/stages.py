"""The six stages of a calibration, as plain functions (the Prefect flow only wraps them).

load tasks -> compress per arm -> sample answers -> judge pairs -> aggregate -> publish.

Each stage writes its table (records in `tokenlens.tables`) under the run's store folder
and returns typed rows for the next one. Every model call goes through a `LedgerClient`,
so a stage rerun pays only for calls the ledger does not hold. Failures become error rows
with the reason (a failed answer is never graded, a bad grade never becomes a number);
running out of budget stops scheduling and raises `SpendLimitReached` after the stage
has kept everything it finished.

Why one module past 400 lines: the stages share one `Calibration` and the row shapes
each hands to the next; read top-down it is the calibration's story in order. The parts
with a job of their own already live beside it (`cells`, `runner`, `store`, `session`,
`estimate`, `rounds`); splitting the six stages apart would scatter that story.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from tokenlens import tables
from tokenlens.calibration.cells import (
    BASELINE_SAMPLE,
    CLEAR,
    SECOND_SAMPLE,
    AnswerCell,
    PairCell,
    answer_cells,
    pair_cells,
    sample_seed,
)
from tokenlens.calibration.runner import NoProgress, Progress, run_bounded
from tokenlens.calibration.store import Store
from tokenlens.compress.arms import CONTROL, Arm, build_ladder
from tokenlens.config import DEFAULT_ANTHROPIC_MODEL, CalibrationConfig
from tokenlens.errors import (
    ArmUnavailable,
    CompressionError,
    JudgeError,
    ModelCallError,
    SpendLimitReached,
)
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter
from tokenlens.models.base import Completion, CompletionRequest, ModelClient
from tokenlens.storage import Location, location
from tokenlens.tables import (
    AnswerRow,
    CompressionRow,
    CompressionStatus,
    GradeRow,
    TaskRow,
)
from tokenlens.tasks import CalibrationTask
from tokenlens.tokens import estimate_tokens

if TYPE_CHECKING:
    from tokenlens.calibration.runs import RunManifest
    from tokenlens.decision import Curve
    from tokenlens.judge import Judge, PairGrade
    from tokenlens.policy import Policy

#: Bump when the compressed-body cache key recipe changes.
COMPRESS_CACHE_VERSION = 1


# --------------------------------------------------------------------------- context


@dataclass
class Calibration:
    """What the stages of one run share: settings, store, ledger, clients, spend."""

    config: CalibrationConfig
    store: Store
    ledger: Ledger
    spend: SpendMeter
    answer_client: LedgerClient
    judge_clients: dict[str, Judge]  # judge name -> MetricJudge / LedgerJudge
    model: str
    backend: str
    progress: Progress = field(default_factory=NoProgress)
    #: What was measured (`calibration_key`); `store.run_id` names this run of it.
    calibration_id: str = ""
    run: RunManifest | None = None

    @property
    def arms(self) -> list[Arm]:
        return build_ladder(self.config.methods, self.config.rates)


def answer_model(config: CalibrationConfig, client: ModelClient) -> str:
    """The model id answers are requested from (the client's, else the config's)."""
    return str(getattr(client, "model", None) or config.model or DEFAULT_ANTHROPIC_MODEL)


def calibration_key(config: CalibrationConfig, tasks: list[CalibrationTask], model: str) -> str:
    """The calibration id: what was measured, with which model, how.

    The sample seed is left out on purpose: runs of one calibration may draw different
    samples (see `tokenlens.calibration.runs`)."""
    from tokenlens.identity import calibration_id

    arms = build_ladder(config.methods, config.rates)
    return calibration_id(
        tasks=tasks,
        arms=arms,
        models={"answer": model, "judge": judge_name_for(config, model)},
        settings={
            "backend": config.resolved_backend(),
            "repeats": config.repeats,
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "judge": config.judge,
            "judge_both_orders": config.judge_both_orders,
            "judge_twice": config.judge_twice,
            "tolerance": config.tolerance,
            "mode": config.mode,
            "llmlingua_model": config.llmlingua_model,
            **_answer_style(config),
        },
    )


def _answer_style(config: CalibrationConfig) -> dict[str, Any]:
    """What the backend adds to every answer request (only the local backend adds any)."""
    if config.resolved_backend() != "local":
        return {}
    from tokenlens.models.local import BRIEF_ANSWER_INSTRUCTION

    return {"answer_instruction": BRIEF_ANSWER_INSTRUCTION}


def judge_name_for(config: CalibrationConfig, model: str) -> str:
    """The judge that decides: the LLM judge when there is one, else the metric."""
    if config.judge == "metric":
        return "metric"
    return config.judge_model or model


# --------------------------------------------------------------------------- 1. load


def task_hash(task: CalibrationTask) -> str:
    return hashlib.sha256(task.model_dump_json().encode("utf-8")).hexdigest()


def select_tasks(config: CalibrationConfig) -> list[CalibrationTask]:
    """The run's tasks (see `CalibrationConfig.selected_tasks`)."""
    return config.selected_tasks()


def load_stage(
    config: CalibrationConfig, store: Store, tasks: list[CalibrationTask], model: str
) -> list[TaskRow]:
    """Write the TASKS table (id, class, content hash, cleartext body, tokens)."""
    rows: list[TaskRow] = []
    for task in tasks:
        body = task.to_request(model=model, max_tokens=config.max_tokens)
        rows.append(
            {
                "task_id": task.id,
                "task_class": task.task_class,
                "content_hash": task_hash(task),
                "request_json": json.dumps(body, sort_keys=True),
                "tokens": request_tokens(body),
            }
        )
    store.write("tasks", rows, tables.TASKS)
    return rows


def request_tokens(body: dict[str, Any]) -> int:
    """Estimated prompt tokens of a Messages body (system + every text block)."""
    from tokenlens.judge import render_request_text

    return estimate_tokens(render_request_text(body))


# --------------------------------------------------------------------------- 2. compress


def compress_key(body: dict[str, Any], arm: Arm, settings: Any) -> str:
    """What determines a compressed body: the input body, the arm and the settings."""
    material = {
        "v": COMPRESS_CACHE_VERSION,
        "body": body,
        "arm": arm.key,
        "settings": settings.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


class _CompressionCell(TypedDict):
    """The columns of a `CompressionRow` known before the arm runs."""

    task_id: str
    task_class: str
    arm: str
    method: str
    rate: float | None
    cache_key: str


def compress_stage(
    cal: Calibration, tasks: list[CalibrationTask], *, write: bool = True
) -> list[CompressionRow]:
    """Compress every task's body with every arm; reuse bodies already computed.

    `write=False` leaves the compressions table alone (a shard compresses its own tasks
    and records nothing but its paid calls).

    An arm that cannot run here (e.g. LLMLingua-2 without its weights) is recorded as
    `unavailable` with the reason for every task; it is never replaced by another rung.
    """
    from tokenlens.compress import CompressSettings, compress_request

    settings = CompressSettings(llmlingua_model=cal.config.llmlingua_model)
    stored = cast(list[CompressionRow], cal.store.read("compressions"))
    previous = {row["cache_key"]: row for row in stored}
    unavailable: dict[str, str] = {}
    rows: list[CompressionRow] = []
    arms = cal.arms
    total = len(tasks) * len(arms)
    cal.progress.start("compress", total)
    done = 0
    for task in tasks:
        body = task.to_request(model=cal.model, max_tokens=cal.config.max_tokens)
        for arm in arms:
            key = compress_key(body, arm, settings)
            base: _CompressionCell = {
                "task_id": task.id,
                "task_class": task.task_class,
                "arm": arm.key,
                "method": arm.method,
                "rate": arm.rate,
                "cache_key": key,
            }
            cached = previous.get(key)
            if cached is not None and cached["status"] == "ok":
                rows.append({**cached, **base})
            elif arm.key in unavailable:
                rows.append(_failed_compression(base, "unavailable", unavailable[arm.key]))
            else:
                try:
                    result = compress_request(body, arm, settings=settings)
                except ArmUnavailable as exc:
                    unavailable[arm.key] = str(exc)
                    rows.append(_failed_compression(base, "unavailable", str(exc)))
                except CompressionError as exc:
                    rows.append(_failed_compression(base, "error", str(exc)))
                else:
                    rows.append(
                        {
                            **base,
                            "status": "ok",
                            "reason": None,
                            "body_json": json.dumps(result.body, sort_keys=True),
                            "original_tokens": result.original_tokens,
                            "compressed_tokens": result.compressed_tokens,
                            "reduction": result.reduction,
                            "eligible_blocks": result.eligible_blocks,
                            "total_blocks": result.total_blocks,
                            "elapsed_ms": result.elapsed_ms,
                        }
                    )
            done += 1
            cal.progress.advance("compress", done, total)
    cal.progress.finish("compress")
    if write:
        cal.store.write("compressions", rows, tables.COMPRESSIONS)
    return rows


def _failed_compression(
    base: _CompressionCell, status: CompressionStatus, reason: str
) -> CompressionRow:
    return {
        **base,
        "status": status,
        "reason": reason,
        "body_json": None,
        "original_tokens": None,
        "compressed_tokens": None,
        "reduction": None,
        "eligible_blocks": None,
        "total_blocks": None,
        "elapsed_ms": None,
    }


def unavailable_arms(compressions: list[CompressionRow]) -> dict[str, str]:
    """Arms that could not run at all here, with the reason (for the report)."""
    return {r["arm"]: r["reason"] or "" for r in compressions if r["status"] == "unavailable"}


# --------------------------------------------------------------------------- 3. sample


@dataclass(frozen=True)
class AnswerPlan:
    """The request of every answer cell, and the cells that could not be asked."""

    requests: dict[AnswerCell, CompletionRequest]
    blocked: dict[AnswerCell, str]  # cell -> why no request (arm failed to compress)


def plan_answers(
    cal: Calibration, tasks: list[CalibrationTask], compressions: list[CompressionRow]
) -> AnswerPlan:
    """Build the request of every answer cell (see `tokenlens.calibration.cells`)."""
    return answer_requests(cal.config, cal.model, tasks, compressions)


def measured_arms(config: CalibrationConfig, compressions: list[CompressionRow]) -> list[str]:
    """The ladder's arm keys that could run here (an unavailable arm is not asked)."""
    ladder = build_ladder(config.methods, config.rates)
    return [arm.key for arm in ladder if not _never_ran(compressions, arm.key)]


def answer_requests(
    config: CalibrationConfig,
    model: str,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
) -> AnswerPlan:
    """The request of every answer cell of a run with `config` (its seed is the sample's).

    On the local backend every request, the cleartext's and each arm's alike, ends with
    the brief-answer instruction (`tokenlens.models.local.brief_answer`)."""
    from tokenlens.models.local import brief_answer

    brief = config.resolved_backend() == "local"
    by_cell = {(r["task_id"], r["arm"]): r for r in compressions}
    arm_keys = measured_arms(config, compressions)
    requests: dict[AnswerCell, CompletionRequest] = {}
    blocked: dict[AnswerCell, str] = {}
    bodies = {t.id: t.to_request(model=model, max_tokens=config.max_tokens) for t in tasks}
    for cell in answer_cells([t.id for t in tasks], [CONTROL, *arm_keys], config.repeats):
        body = bodies[cell.task_id]
        if cell.arm not in (CLEAR, CONTROL):
            row = by_cell[(cell.task_id, cell.arm)]
            body_json = row["body_json"]
            if row["status"] != "ok" or body_json is None:
                blocked[cell] = f"compression {row['status']}: {row['reason']}"
                continue
            body = json.loads(body_json)
        if brief:
            body = brief_answer(body)
        requests[cell] = CompletionRequest.from_body(
            body,
            model=model,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            seed=sample_seed(config.seed, cell.replicate, cell.sample),
        )
    return AnswerPlan(requests, blocked)


def _never_ran(compressions: list[CompressionRow], arm: str) -> bool:
    rows = [r for r in compressions if r["arm"] == arm]
    return bool(rows) and all(r["status"] == "unavailable" for r in rows)


def sample_stage(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    *,
    cells: Collection[AnswerCell] | None = None,
    write: bool = True,
) -> list[AnswerRow]:
    """Obtain every answer (ledger first), at most `concurrency` calls at a time.

    `cells` limits it to those answer cells (a sequential round); `write=False` leaves the
    answers table to the caller, who writes the rows of every round at the end."""
    plan = plan_answers(cal, tasks, compressions)
    if cells is not None:
        wanted = set(cells)
        plan = AnswerPlan(
            {c: r for c, r in plan.requests.items() if c in wanted},
            {c: why for c, why in plan.blocked.items() if c in wanted},
        )
    client = cal.answer_client
    keys = {cell: client.key(request) for cell, request in plan.requests.items()}
    unique: dict[str, CompletionRequest] = {}
    for cell, request in plan.requests.items():
        unique.setdefault(keys[cell], request)
    if cal.config.batch and cal.backend == "anthropic":
        from tokenlens.calibration.batching import complete_in_batch

        complete_in_batch(client, [r for k, r in unique.items() if k not in cal.ledger])
    outcome = run_bounded(
        list(unique),
        lambda key: client.complete(unique[key]),
        concurrency=cal.config.concurrency,
        spend=cal.spend,
        progress=cal.progress,
        stage="sample",
    )
    task_class = {t.id: t.task_class for t in tasks}
    rows: list[AnswerRow] = []
    for cell, request in plan.requests.items():
        key = keys[cell]
        row: AnswerRow = {
            "task_id": cell.task_id,
            "task_class": task_class[cell.task_id],
            "arm": cell.arm,
            "replicate": cell.replicate,
            "sample": cell.sample,
            "seed": request.seed,
            "call_key": key,
            "text": None,
            "stop_reason": None,
            "input_tokens": None,
            "output_tokens": None,
            "cost_usd": None,
            "latency_s": None,
            "error": None,
        }
        if key in outcome.results:
            completion = outcome.results[key]
            _fill_completion(row, completion)
        elif key in outcome.errors:
            exc = outcome.errors[key]
            row["error"] = _describe(exc)
            paid = getattr(exc, "completion", None)
            if paid is not None:
                _fill_completion(row, paid)
        else:
            row["error"] = "not run: max spend reached"
        rows.append(row)
    for cell, reason in plan.blocked.items():
        rows.append(
            {
                "task_id": cell.task_id,
                "task_class": task_class[cell.task_id],
                "arm": cell.arm,
                "replicate": cell.replicate,
                "sample": cell.sample,
                "seed": sample_seed(cal.config.seed, cell.replicate, cell.sample),
                "call_key": "",
                "text": None,
                "stop_reason": None,
                "input_tokens": None,
                "output_tokens": None,
                "cost_usd": None,
                "latency_s": None,
                "error": reason,
            }
        )
    if write:
        cal.store.write("answers", rows, tables.ANSWERS)
    cal.ledger.compact()
    if outcome.stopped_by_spend:
        raise spend_stop(cal, "sampling", len(outcome.skipped))
    return rows


def _fill_completion(row: AnswerRow, completion: Completion) -> None:
    row.update(
        {
            "text": completion.text,
            "stop_reason": completion.stop_reason,
            "input_tokens": completion.usage.input_tokens,
            "output_tokens": completion.usage.output_tokens,
            "cost_usd": completion.cost_usd,
            "latency_s": completion.latency_s,
        }
    )


def _describe(exc: BaseException) -> str:
    kind = type(exc).__name__
    return f"{kind}: {exc}" if isinstance(exc, ModelCallError | JudgeError) else repr(exc)


def spend_stop(cal: Calibration, stage: str, skipped: int) -> SpendLimitReached:
    """The error that ends a run at its spend cap, saying how to continue."""
    return SpendLimitReached(
        f"max spend ${cal.config.max_spend:.2f} reached during {stage}: "
        f"${cal.spend.spent:.4f} spent on {cal.spend.new_calls} new calls this run; "
        f"{skipped} calls were not made. Everything finished is stored in "
        f"{cal.ledger.root}. To continue, run the same command again with a higher "
        "--max-spend (or none): stored calls are reused, not paid again."
    )


# --------------------------------------------------------------------------- 4. judge


def judge_stage(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    answers: list[AnswerRow],
    *,
    only: Collection[PairCell] | None = None,
    write: bool = True,
) -> list[GradeRow]:
    """Grade every (baseline, second answer) pair with every configured judge.

    `only` limits it to those pairs (a sequential round); `write=False` as in
    `sample_stage`."""
    config = cal.config
    by_task = {t.id: t for t in tasks}
    comp = {(r["task_id"], r["arm"]): r for r in compressions}
    ans = {(r["task_id"], r["arm"], r["replicate"], r["sample"]): r for r in answers}
    arm_keys = [arm.key for arm in cal.arms if not _never_ran(compressions, arm.key)]
    pairs = pair_cells([t.id for t in tasks], [CONTROL, *arm_keys], config.repeats)
    if only is not None:
        chosen = set(only)
        pairs = [p for p in pairs if p in chosen]
    originals = {t.id: t.to_request(model=cal.model, max_tokens=config.max_tokens) for t in tasks}
    from tokenlens.judge import render_request_text

    request_text = {tid: render_request_text(body) for tid, body in originals.items()}
    clear_tokens = {tid: request_tokens(body) for tid, body in originals.items()}

    jobs: list[tuple[str, int, PairCell]] = []
    for judge_name in cal.judge_clients:
        for pair in pairs:
            jobs.append((judge_name, 0, pair))
            if config.judge_twice and pair.arm == CONTROL and judge_name != "metric":
                jobs.append((judge_name, 1, pair))

    def base_row(judge_name: str, judge_pass: int, pair: PairCell) -> GradeRow:
        task = by_task[pair.task_id]
        arm = Arm.parse(pair.arm)
        c = comp.get((pair.task_id, pair.arm))
        tokens = clear_tokens[pair.task_id]
        return {
            "task_id": task.id,
            "task_class": task.task_class,
            "arm": pair.arm,
            "method": arm.method,
            "rate": arm.rate,
            "replicate": pair.replicate,
            "judge": judge_name,
            "grade_clear": None,
            "grade_comp": None,
            "reduction": 0.0 if pair.arm == CONTROL else (c["reduction"] if c else None),
            "tokens_clear": (c["original_tokens"] if c else None) or tokens,
            "tokens_comp": (
                tokens if pair.arm == CONTROL else (c["compressed_tokens"] if c else None)
            ),
            "note": None,
            "error": None,
            "judge_pass": judge_pass,
        }

    def grade(job: tuple[str, int, PairCell]) -> GradeRow:
        judge_name, judge_pass, pair = job
        row = base_row(judge_name, judge_pass, pair)
        first = ans.get((pair.task_id, CLEAR, pair.replicate, BASELINE_SAMPLE))
        second = ans.get((pair.task_id, pair.arm, pair.replicate, SECOND_SAMPLE))
        problem = _answer_problem("cleartext answer", first) or _answer_problem(
            "second answer" if pair.arm == CONTROL else "compressed answer", second
        )
        if problem:
            row["error"] = problem
            return row
        assert first is not None and second is not None
        assert first["text"] is not None and second["text"] is not None  # no error: a text
        judge = cal.judge_clients[judge_name]
        if judge_pass:
            assert isinstance(judge, LedgerJudge)  # judged twice: LLM judges only
            judge = judge.again
        result = judge.grade_pair(
            case_key=pair.case_key,
            original_request_text=request_text[pair.task_id],
            reference=by_task[pair.task_id].reference,
            answer_clear=first["text"],
            answer_comp=second["text"],
            both_orders=config.judge_both_orders,
        )
        row.update(
            {
                "grade_clear": result.grade_clear,
                "grade_comp": result.grade_comp,
                "note": result.note,
            }
        )
        return row

    outcome = run_bounded(
        _distinct_first(jobs, ans),
        lambda i: grade(jobs[i]),
        concurrency=config.concurrency,
        spend=cal.spend,
        progress=cal.progress,
        stage="judge",
    )
    rows: list[GradeRow] = []
    for i, job in enumerate(jobs):
        if i in outcome.results:
            rows.append(outcome.results[i])
        else:
            row = base_row(*job)
            exc = outcome.errors.get(i)
            row["error"] = _describe(exc) if exc else "not judged: max spend reached"
            rows.append(row)
    if write:
        cal.store.write("grades", rows, tables.GRADES)
    cal.ledger.compact()
    if outcome.stopped_by_spend:
        raise spend_stop(cal, "judging", len(outcome.skipped))
    return rows


def _distinct_first(
    jobs: list[tuple[str, int, PairCell]], answers: dict[tuple[str, str, int, int], AnswerRow]
) -> list[int]:
    """Job indices, each pair of answer texts' first job before any repeat of that pair.

    Pairs with the same two answers ask the judge the same question (e.g. an arm that
    left a prompt unchanged was answered by the control's very call). Scheduled side by
    side, the second holds a worker while it waits for the first's call (a quarter of
    the judge stage's slots in the bench); scheduled after, it is a ledger hit."""
    seen: set[tuple[object, ...]] = set()
    first: list[int] = []
    repeats: list[int] = []
    for index, (judge_name, judge_pass, pair) in enumerate(jobs):
        clear = answers.get((pair.task_id, CLEAR, pair.replicate, BASELINE_SAMPLE))
        second = answers.get((pair.task_id, pair.arm, pair.replicate, SECOND_SAMPLE))
        texts = tuple(row["text"] if row else None for row in (clear, second))
        calls = (judge_name, judge_pass, pair.task_id, *texts)
        (repeats if calls in seen else first).append(index)
        seen.add(calls)
    return first + repeats


def _answer_problem(what: str, row: AnswerRow | None) -> str | None:
    if row is None:
        return f"{what} missing"
    if row["error"]:
        return f"{what} failed: {row['error']}"
    return None


def judge_salt(again: bool = False) -> str:
    """The ledger salt of LLM judge calls: the judge prompt's version (and the second pass
    of `--judge-twice`), so a new prompt never replays an old verdict."""
    from tokenlens.judge import JUDGE_PROMPT_VERSION

    salt = f"judge-prompt:{JUDGE_PROMPT_VERSION}"
    return salt + "|pass:1" if again else salt


class LedgerJudge:
    """A judge whose calls go through the ledger, salted with the judge prompt version.

    `again` is the same judge with a second salt, for --judge-twice: the repeated
    judgement of a control pair is a distinct call, never the cached first one.
    """

    def __init__(self, make: Callable[[str], Judge], salt: str):
        self._make = make
        self._salt = salt
        self._judge = make(salt)
        self.name = self._judge.name
        self.again = make(salt + "|pass:1")

    def grade_pair(self, **kwargs: Any) -> PairGrade:
        return self._judge.grade_pair(**kwargs)


def build_judges(
    config: CalibrationConfig,
    *,
    answer_client: ModelClient,
    model: str,
    ledger: Ledger,
    spend: SpendMeter,
    on_call: Callable[[bool, Any], None] | None = None,
) -> dict[str, Judge]:
    """The judges a run uses, by name; LLM judge calls go through the ledger."""
    from tokenlens.judge import LLMJudge, MetricJudge

    judges: dict[str, Judge] = {}
    if config.judge in ("metric", "both"):
        judges["metric"] = MetricJudge()
    if config.judge in ("llm", "both"):
        judge_model = config.judge_model or model
        inner = answer_client

        def make(salt: str) -> LLMJudge:
            client = LedgerClient(
                inner, ledger, kind="judge", salt=salt, spend=spend, on_call=on_call
            )
            return LLMJudge(client, judge_model)

        llm = LedgerJudge(make, judge_salt())
        judges[llm.name] = llm
    return judges


# --------------------------------------------------------------------------- 5-6.


def aggregate_stage(cal: Calibration, grades: list[GradeRow]) -> Curve:
    """Grades -> the per-class curve of the deciding judge (written as `curve`)."""
    import pandas as pd

    from tokenlens.decision import aggregate

    df = pd.DataFrame(grades, columns=tables.GRADES.names)
    curve = aggregate(
        df,
        tolerance=cal.config.tolerance,
        mode=cal.config.mode,
        judge=judge_name_for(cal.config, cal.model),
        seed=cal.config.seed,
    )
    cal.store.write_table("curve", curve.to_arrow())
    return curve


@dataclass(frozen=True)
class Published:
    policy: Policy
    #: Paths or URLs (the reports root may be ``s3://...``).
    policy_path: str
    report_path: str
    exit_code: int
    #: The run's report as markdown, its plot (PNG) and the name the markdown links it by,
    #: for the Prefect artifacts (as written: not read back from the store).
    markdown: str | None = None
    plot_png: bytes = b""
    plot_name: str = ""
    unresolved: tuple[str, ...] = ()


def run_reports_dir(reports: str | Path | Location, run_id: str) -> Location:
    """Where one run's policy and report live: `<reports>/runs/<run-id>/`."""
    return location(reports).child("runs", run_id)


def publish_stage(
    cal: Calibration,
    curve: Curve,
    grades: list[GradeRow],
    requested: list[str] | None,
    unavailable: dict[str, str] | None = None,
    tasks: list[CalibrationTask] | None = None,
) -> Published:
    """Decide; write the run's policy and report under `<reports>/runs/<run-id>/`, then
    publish the policy as `<reports>/policy/<calibration-id>.json` and `latest.json`.

    Every run keeps its own files, so an older run's report never shows a newer run.
    With the run's `tasks`, the policy is routed by the class the proxy will *predict*
    (`tokenlens.decision.applied`) and the report shows the policy as applied.
    """
    import pandas as pd

    from tokenlens.calibration.carry import with_carry_over
    from tokenlens.decision import decide, exit_code, judge_agreement, unresolved_classes
    from tokenlens.policy import write_policy
    from tokenlens.report import write_report

    policy = decide(
        curve,
        calibration_id=cal.calibration_id or cal.store.run_id,
        model=cal.model,
        requested_classes=requested,
    ).model_copy(update={"run_id": cal.store.run_id, "backend": cal.backend})
    applied: list[Any] = []
    if tasks:
        from tokenlens.decision.applied import applied_retention, route_policy

        routing = route_policy(policy, curve, tasks)
        policy = routing.policy
        applied = applied_retention(
            pd.DataFrame(grades, columns=tables.GRADES.names),
            policy,
            routing.labels,
            judge=judge_name_for(cal.config, cal.model),
        )
    policy = with_carry_over(policy, cal.config)
    run_folder = run_reports_dir(cal.config.reports, cal.store.run_id)
    agreement = None
    judges = list(cal.judge_clients)
    if len(judges) == 2:
        deciding = judge_name_for(cal.config, cal.model)
        other = next(name for name in judges if name != deciding)
        agreement = judge_agreement(
            pd.DataFrame(grades, columns=tables.GRADES.names),
            judges=(deciding, other),
            tolerance=cal.config.tolerance,
            mode=cal.config.mode,
        )
    paths = write_report(
        policy,
        curve,
        run_folder,
        agreement=agreement,
        local_model=cal.backend == "local",
        unavailable=unavailable,
        applied=applied,
    )
    run_policy = run_folder.child("policy.json")
    run_policy.write_text(policy.model_dump_json(indent=2) + "\n")
    write_policy(policy, location(cal.config.reports).child("policy"))
    return Published(
        policy,
        run_policy.url,
        paths.html.url,
        exit_code(policy, requested),
        markdown=paths.pane_text,  # the Prefect UI's narrow artifact pane
        plot_png=paths.png,
        plot_name=paths.plot.name,
        unresolved=tuple(unresolved_classes(policy, requested)),
    )

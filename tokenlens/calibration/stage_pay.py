"""Stage 3, pay: obtain every answer and grade every pair, in one stream of calls.

A pair is judged the moment both its answers exist, while other answers are still being
asked: no barrier between sampling and judging, so no worker idles while the slowest
answers of the run come in, and the judge's first calls overlap the answers' last. Every
call goes through the ledger (`Calls`), so a rerun or a resume pays only for calls the
ledger does not hold; the answers and grades tables are written as before, one per
stage, in the same row order whatever order the calls finished in.

Nor is there a barrier after compression: given the compress stage's future, the stream
starts with the cleartext and control answers (they need no compressed body) and takes
the arms' answers once the compressions are in, so compression overlaps network waits.

Failures become error rows with the reason (a failed answer is never graded, a bad grade
never becomes a number); running out of budget stops scheduling and raises
`SpendLimitReached` after the tables of everything finished are written, and an open
circuit breaker (`UpstreamUnavailable`: the upstream is down) does the same with its error.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import cast

from tokenlens import tables
from tokenlens.calibration.answers import (
    AnswerPlan,
    answer_requests,
    answer_row,
    describe,
    outcome_row,
)
from tokenlens.calibration.cells import AnswerCell, PairCell, sample_seed
from tokenlens.calibration.context import Calibration
from tokenlens.calibration.judging import (
    GradeJob,
    Grader,
    LedgerJudge,
    answer_problem,
    grade_jobs,
)
from tokenlens.calibration.runner import run_stream
from tokenlens.calibration.stage_compress import measured_arms
from tokenlens.errors import SpendLimitReached
from tokenlens.models.base import Completion, CompletionRequest
from tokenlens.tables import AnswerRow, CompressionRow, GradeRow
from tokenlens.tasks import CalibrationTask

#: A unit of the stream: ("answer", call key), ("grade", grade job), or ("compressed",
#: None): the compress stage, running beside the stream, is done.
Work = tuple[str, object]

#: The compress stage's rows, or their future while it runs beside the pay stage.
Compressions = list[CompressionRow] | Future[list[CompressionRow]]


@dataclass(frozen=True)
class Paid:
    """The answers and grades of the cells asked, in table order."""

    answers: list[AnswerRow]
    grades: list[GradeRow]


def pay_stage(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: Compressions,
    *,
    pairs: Collection[PairCell] | None = None,
    write: bool = True,
    on_started: Callable[[], None] | None = None,
) -> Paid:
    """Obtain every answer (ledger first) and grade every pair with every configured judge,
    at most `concurrency` calls at a time.

    `compressions` may still be coming (a future of the compress stage): the cleartext
    and control answers, which need no compressed body, are asked meanwhile, and the
    arms' answers join the stream once it is done. `pairs` limits it to those pairs and
    the answers they need (a sequential round); `write=False` leaves the answers and
    grades tables to the caller; `on_started` runs once the first calls are in flight
    (the caller's side work)."""
    config = cal.config
    calls = cal.calls
    batch = config.batch and cal.backend == "anthropic"
    if isinstance(compressions, Future) and (pairs is not None or batch):
        compressions = compressions.result()
    known = compressions if isinstance(compressions, list) else None
    stream = _Stream(cal, tasks, pairs)
    first = stream.extend(known)
    if batch:
        from tokenlens.calibration.batching import complete_in_batch

        unpaid = [r for k, r in stream.unique.items() if k not in calls.ledger]
        complete_in_batch(calls.answer_client, unpaid)
    awaiting: dict[Future[list[CompressionRow]], Work] = {}
    if isinstance(compressions, Future):
        awaiting[compressions] = ("compressed", None)
    outcome = run_stream(
        first,
        stream.run,
        then=stream.then,
        concurrency=config.concurrency,
        spend=calls.spend,
        name="pay",
        started=on_started,
        awaiting=awaiting,
    )
    cal.progress.finish("sample")
    cal.progress.finish("judge")
    answers = stream.answer_rows()
    grades = [
        stream.graded.get(job) or _not_graded(stream, job, outcome.errors.get(("grade", job)))
        for job in stream.jobs
    ]
    if write:
        cal.store.write("answers", answers, tables.ANSWERS)
        cal.store.write("grades", grades, tables.GRADES)
    calls.ledger.compact()
    if outcome.unavailable is not None:
        raise outcome.unavailable
    if outcome.stopped_by_spend:
        unasked = sum(1 for kind, _ in outcome.skipped if kind == "answer")
        stage = "sampling" if unasked else "judging"
        raise spend_stop(cal, stage, len(outcome.skipped))
    return Paid(answers, grades)


def _not_graded(stream: _Stream, job: GradeJob, exc: BaseException | None) -> GradeRow:
    row = stream.grader.base_row(job)
    if exc is not None:
        row["error"] = describe(exc)
        return row
    problem = stream.answer_problem(job)
    row["error"] = problem or "not judged: max spend reached"
    return row


class _Stream:
    """The bookkeeping of one pay stage: which grade jobs wait on which answer calls.

    It starts from the cells it can ask (`extend(None)`: cleartext and control, while the
    arms are compressed) and takes the rest when the compressions are in
    (`extend(rows)`); the plan and the grade jobs are then the whole run's, in table order.
    """

    def __init__(
        self, cal: Calibration, tasks: list[CalibrationTask], pairs: Collection[PairCell] | None
    ):
        self.cal = cal
        self.tasks = tasks
        self.pairs = set(pairs) if pairs is not None else None
        self.plan = AnswerPlan({}, {})
        self.jobs: list[GradeJob] = []
        self.keys: dict[AnswerCell, str] = {}
        self.unique: dict[str, CompletionRequest] = {}
        self.task_class = {t.id: t.task_class for t in tasks}
        self.grader = Grader(cal.config, cal.model, cal.calls.judges, tasks, [])
        self.done: dict[str, Completion | BaseException] = {}
        self.rows: dict[AnswerCell, AnswerRow] = {}
        self.graded: dict[GradeJob, GradeRow] = {}
        # grade jobs waiting on answer calls: call key -> jobs, and how many each lacks
        self.waiting: dict[str, list[GradeJob]] = {}
        self.lacking: dict[GradeJob, int] = {}
        # the same question to the same judge twice: the repeat waits for the first (a
        # ledger hit then, instead of a worker held while the first call is in flight)
        self.asked: dict[tuple[object, ...], list[GradeJob] | None] = {}
        self.answers_done = 0
        self.grades_done = 0
        # done without a new call (ledger hits, metric grades): rates count the others
        self._answer_hits = cal.calls.answer_client.stats.cached
        self._judge_hits = self._llm_hits()
        self.metric_grades = 0
        self._progress_started = False

    def extend(self, compressions: list[CompressionRow] | None) -> list[Work]:
        """Take the cells `compressions` allows (None: those that need none); returns the
        new work: answer calls not asked yet, then grades that need no call."""
        config = self.cal.config
        if compressions is not None:
            self.grader.know(compressions)
        plan = answer_requests(config, self.cal.model, self.tasks, compressions)
        arm_keys = measured_arms(config, compressions)
        jobs = grade_jobs(config, list(self.cal.calls.judges), self.tasks, arm_keys)
        if self.pairs is not None:
            jobs = [job for job in jobs if job[2] in self.pairs]
            plan = plan.only({p.baseline for p in self.pairs} | {p.second for p in self.pairs})
        self.plan, self.jobs = plan, jobs
        client = self.cal.calls.answer_client
        work: list[Work] = []
        for cell, request in plan.requests.items():
            if cell not in self.keys:
                key = self.keys[cell] = client.key(request)
                if key not in self.unique:
                    self.unique[key] = request
                    work.append(("answer", key))
        ready: list[GradeJob] = []
        for job in jobs:
            if job in self.lacking:
                continue
            pair = job[2]
            needed = {
                self.keys[c]
                for c in (pair.baseline, pair.second)
                if c in self.keys and self.keys[c] not in self.done
            }
            self.lacking[job] = len(needed)
            for key in needed:
                self.waiting.setdefault(key, []).append(job)
            if not needed:
                ready.append(job)
        self._progress()
        return work + list(self._release(ready))

    def _progress(self) -> None:
        """Start the sample and judge progress, or tell it the totals grew."""
        progress = self.cal.progress
        if not self._progress_started:
            self._progress_started = True
            progress.start("sample", len(self.unique))
            progress.start("judge", len(self.jobs))
        else:
            progress.advance("sample", self.answers_done, len(self.unique), self.answers_free())
            progress.advance("judge", self.grades_done, len(self.jobs), self.grades_free())

    def run(self, work: Work) -> Completion | GradeRow:
        kind, what = work
        if kind == "answer":
            assert isinstance(what, str)
            return self.cal.calls.answer_client.complete(self.unique[what])
        job = cast(GradeJob, what)
        return self.grader.grade(job, *self._answers(job))

    def then(self, work: Work, result: object) -> Iterable[Work]:
        """Record a finished unit of work; the work that can start now."""
        kind, what = work
        if kind == "compressed":
            if isinstance(result, BaseException):
                raise result  # the compress stage failed: so does the run
            return self.extend(cast(list[CompressionRow], result))
        if kind == "answer":
            assert isinstance(what, str)
            assert isinstance(result, Completion | BaseException)
            self.done[what] = result
            self.answers_done += 1
            self.cal.progress.advance(
                "sample", self.answers_done, len(self.unique), self.answers_free()
            )
            ready = []
            for job in self.waiting.pop(what, []):
                self.lacking[job] -= 1
                if not self.lacking[job]:
                    ready.append(job)
            return list(self._release(ready))
        job = cast(GradeJob, what)
        if isinstance(result, dict):
            self.graded[job] = cast(GradeRow, result)
        self.grades_done += 1
        self.metric_grades += int(job[0] == "metric")
        self.cal.progress.advance("judge", self.grades_done, len(self.jobs), self.grades_free())
        repeats = self.asked.get(self._question(job)) or []
        self.asked[self._question(job)] = None
        return [("grade", other) for other in repeats]

    def answers_free(self) -> int:
        """Answers this stream got without a new call (ledger hits, merged repeats)."""
        return self.cal.calls.answer_client.stats.cached - self._answer_hits

    def grades_free(self) -> int:
        """Grades this stream made without a new call: metric grades, LLM judge hits."""
        return self.metric_grades + self._llm_hits() - self._judge_hits

    def _llm_hits(self) -> int:
        judges = self.cal.calls.judges.values()
        return sum(j.hits() for j in judges if isinstance(j, LedgerJudge))

    def _release(self, jobs: list[GradeJob]) -> Iterable[Work]:
        """Grade jobs whose answers exist, each question's first before its repeats."""
        for job in jobs:
            question = self._question(job)
            if question in self.asked:
                parked = self.asked[question]
                if parked is not None:  # the first is in flight: wait for it
                    parked.append(job)
                    continue
            else:
                self.asked[question] = []
            yield ("grade", job)

    def _question(self, job: GradeJob) -> tuple[object, ...]:
        judge_name, judge_pass, pair = job
        first, second = self._answers(job)
        texts = tuple(row["text"] if row else None for row in (first, second))
        return (judge_name, judge_pass, pair.task_id, *texts)

    def _answers(self, job: GradeJob) -> tuple[AnswerRow | None, AnswerRow | None]:
        pair = job[2]
        return self.row(pair.baseline), self.row(pair.second)

    def row(self, cell: AnswerCell) -> AnswerRow | None:
        """The answer row of a cell, once its call finished (or it was blocked)."""
        if cell in self.rows:
            return self.rows[cell]
        task_class = self.task_class[cell.task_id]
        if cell in self.plan.blocked:
            seed = sample_seed(self.cal.config.seed, cell.replicate, cell.sample)
            row = answer_row(
                cell, task_class, seed=seed, call_key="", error=self.plan.blocked[cell]
            )
        elif cell in self.keys and self.keys[cell] in self.done:
            key = self.keys[cell]
            row = outcome_row(cell, task_class, self.plan.requests[cell], key, self.done[key])
        else:
            return None
        self.rows[cell] = row
        return row

    def answer_rows(self) -> list[AnswerRow]:
        """Every answer row in table order: asked cells, then blocked ones."""
        rows: list[AnswerRow] = []
        for cell, request in self.plan.requests.items():
            found = self.row(cell)
            if found is None:  # never asked: the spend cap stopped the stream first
                key = self.keys[cell]
                found = outcome_row(cell, self.task_class[cell.task_id], request, key, None)
                self.rows[cell] = found
            rows.append(found)
        rows.extend(r for c in self.plan.blocked if (r := self.row(c)) is not None)
        return rows

    def answer_problem(self, job: GradeJob) -> str | None:
        first, second = self._answers(job)
        what = "second answer" if job[2].arm == "control" else "compressed answer"
        return answer_problem("cleartext answer", first) or answer_problem(what, second)


def spend_stop(cal: Calibration, stage: str, skipped: int) -> SpendLimitReached:
    """The error that ends a run at its spend cap, saying how to continue."""
    return SpendLimitReached(
        f"max spend ${cal.config.max_spend:.2f} reached during {stage}: "
        f"${cal.calls.spend.spent:.4f} spent on {cal.calls.spend.new_calls} new calls this run; "
        f"{skipped} calls were not made. Everything finished is stored in "
        f"{cal.calls.ledger.root}. To continue, run the same command again with a higher "
        "--max-spend (or none): stored calls are reused, not paid again."
    )

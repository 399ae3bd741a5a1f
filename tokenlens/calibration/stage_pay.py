"""Stage 3, pay: obtain every answer and grade every pair, in one stream of calls.

A pair is judged the moment both its answers exist, while other answers are still being
asked: no barrier between sampling and judging, so no worker idles while the slowest
answers of the run come in, and the judge's first calls overlap the answers' last. Every
call goes through the ledger (`Calls`), so a rerun or a resume pays only for calls the
ledger does not hold; the answers and grades tables are written as before, one per
stage, in the same row order whatever order the calls finished in.

Failures become error rows with the reason (a failed answer is never graded, a bad grade
never becomes a number); running out of budget stops scheduling and raises
`SpendLimitReached` after the tables of everything finished are written.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

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
from tokenlens.calibration.judging import GradeJob, Grader, answer_problem, grade_jobs
from tokenlens.calibration.runner import run_stream
from tokenlens.calibration.stage_compress import measured_arms
from tokenlens.errors import SpendLimitReached
from tokenlens.models.base import Completion, CompletionRequest
from tokenlens.tables import AnswerRow, CompressionRow, GradeRow
from tokenlens.tasks import CalibrationTask

#: A unit of the stream: ("answer", call key) or ("grade", index of the grade job).
Work = tuple[str, str | int]


@dataclass(frozen=True)
class Paid:
    """The answers and grades of the cells asked, in table order."""

    answers: list[AnswerRow]
    grades: list[GradeRow]


def pay_stage(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    *,
    pairs: Collection[PairCell] | None = None,
    write: bool = True,
    on_started: Callable[[], None] | None = None,
) -> Paid:
    """Obtain every answer (ledger first) and grade every pair with every configured judge,
    at most `concurrency` calls at a time.

    `pairs` limits it to those pairs and the answers they need (a sequential round);
    `write=False` leaves the answers and grades tables to the caller; `on_started` runs
    once the first calls are in flight (the caller's side work)."""
    config = cal.config
    calls = cal.calls
    plan = answer_requests(config, cal.model, tasks, compressions)
    jobs = grade_jobs(config, list(calls.judges), tasks, measured_arms(config, compressions))
    if pairs is not None:
        chosen = set(pairs)
        jobs = [job for job in jobs if job[2] in chosen]
        plan = plan.only({p.baseline for p in chosen} | {p.second for p in chosen})
    stream = _Stream(cal, tasks, compressions, plan, jobs)
    if config.batch and cal.backend == "anthropic":
        from tokenlens.calibration.batching import complete_in_batch

        unpaid = [r for k, r in stream.unique.items() if k not in calls.ledger]
        complete_in_batch(calls.answer_client, unpaid)
    outcome = run_stream(
        stream.first(),
        stream.run,
        then=stream.then,
        concurrency=config.concurrency,
        spend=calls.spend,
        name="pay",
        started=on_started,
    )
    cal.progress.finish("sample")
    cal.progress.finish("judge")
    answers = stream.answer_rows()
    grades = [
        stream.graded.get(i) or _not_graded(stream, job, outcome.errors.get(("grade", i)))
        for i, job in enumerate(jobs)
    ]
    if write:
        cal.store.write("answers", answers, tables.ANSWERS)
        cal.store.write("grades", grades, tables.GRADES)
    calls.ledger.compact()
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
    """The bookkeeping of one pay stage: which grade jobs wait on which answer calls."""

    def __init__(
        self,
        cal: Calibration,
        tasks: list[CalibrationTask],
        compressions: list[CompressionRow],
        plan: AnswerPlan,
        jobs: list[GradeJob],
    ):
        self.cal = cal
        self.plan = plan
        self.jobs = jobs
        client = cal.calls.answer_client
        self.keys = {cell: client.key(request) for cell, request in plan.requests.items()}
        self.unique: dict[str, CompletionRequest] = {}
        for cell, request in plan.requests.items():
            self.unique.setdefault(self.keys[cell], request)
        self.task_class = {t.id: t.task_class for t in tasks}
        self.grader = Grader(cal.config, cal.model, cal.calls.judges, tasks, compressions)
        self.done: dict[str, Completion | BaseException] = {}
        self.rows: dict[AnswerCell, AnswerRow] = {}
        self.graded: dict[int, GradeRow] = {}
        # grade jobs waiting on answer calls: call key -> job indices, and how many each lacks
        self.waiting: dict[str, list[int]] = {}
        self.lacking: dict[int, int] = {}
        # the same question to the same judge twice: the repeat waits for the first (a
        # ledger hit then, instead of a worker held while the first call is in flight)
        self.asked: dict[tuple[object, ...], list[int] | None] = {}
        self.ready: list[int] = []
        for index, (_, _, pair) in enumerate(jobs):
            needed = {self.keys[c] for c in (pair.baseline, pair.second) if c in self.keys}
            self.lacking[index] = len(needed)
            for key in needed:
                self.waiting.setdefault(key, []).append(index)
            if not needed:
                self.ready.append(index)
        self.answers_done = 0
        self.grades_done = 0
        cal.progress.start("sample", len(self.unique))
        cal.progress.start("judge", len(jobs))

    def first(self) -> list[Work]:
        """Every answer call, then the grades that need no call (a blocked answer)."""
        return [("answer", key) for key in self.unique] + list(self._release(self.ready))

    def run(self, work: Work) -> Completion | GradeRow:
        kind, what = work
        if kind == "answer":
            assert isinstance(what, str)
            return self.cal.calls.answer_client.complete(self.unique[what])
        assert isinstance(what, int)
        job = self.jobs[what]
        return self.grader.grade(job, *self._answers(job))

    def then(self, work: Work, result: Completion | GradeRow | BaseException) -> Iterable[Work]:
        """Record a finished unit of work; the grade jobs that can start now."""
        kind, what = work
        if kind == "answer":
            assert isinstance(what, str)
            assert not isinstance(result, dict)
            self.done[what] = result
            self.answers_done += 1
            self.cal.progress.advance("sample", self.answers_done, len(self.unique))
            ready = []
            for index in self.waiting.pop(what, []):
                self.lacking[index] -= 1
                if not self.lacking[index]:
                    ready.append(index)
            return list(self._release(ready))
        assert isinstance(what, int)
        if isinstance(result, dict):
            self.graded[what] = result
        self.grades_done += 1
        self.cal.progress.advance("judge", self.grades_done, len(self.jobs))
        repeats = self.asked.get(self._question(what)) or []
        self.asked[self._question(what)] = None
        return [("grade", index) for index in repeats]

    def _release(self, indices: list[int]) -> Iterable[Work]:
        """Grade jobs whose answers exist, each question's first before its repeats."""
        for index in indices:
            question = self._question(index)
            if question in self.asked:
                parked = self.asked[question]
                if parked is not None:  # the first is in flight: wait for it
                    parked.append(index)
                    continue
            else:
                self.asked[question] = []
            yield ("grade", index)

    def _question(self, index: int) -> tuple[object, ...]:
        judge_name, judge_pass, pair = self.jobs[index]
        first, second = self._answers(self.jobs[index])
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

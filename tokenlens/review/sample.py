"""Which judged pairs a person reviews, and what the person is shown for each.

Two kinds of object, on purpose:

* `ReviewCase` is the server's record of a sampled pair: task, class, arm, replicate and
  which side holds the cleartext answer. It is stored with the sample and never rendered.
* `BlindCase` is all the page receives: the request, the reference and answers A and B,
  in the judge's own A/B order (`tokenlens.judge.swap_for` of the pair's case key, the
  exact function the judge stage used) and trimmed by the judge's own limits. It has no
  field that could carry an arm, a rate or a grade, so a template cannot leak one.

The draw is stratified: classes take turns, and within a class its arms take turns with
the control arm first, so a small sample still covers every class, reaches the control
pairs (the judge's noise floor, checked against people) and spreads over the ladder.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow.parquet as pq

from tokenlens.calibration.cells import BASELINE_SAMPLE, CLEAR, SECOND_SAMPLE, PairCell
from tokenlens.calibration.stage_load import task_hash
from tokenlens.compress.arms import CONTROL
from tokenlens.errors import TokenLensError
from tokenlens.judge import (
    MAX_ANSWER_CHARS,
    MAX_REFERENCE_CHARS,
    MAX_REQUEST_CHARS,
    render_request_text,
    swap_for,
    trim_middle,
)
from tokenlens.tables import AnswerRow, GradeRow, TaskRow
from tokenlens.tasks import load_tasks


class ReviewError(TokenLensError):
    """A review cannot be set up or a grade cannot be taken (the message says why)."""


@dataclass(frozen=True)
class ReviewCase:
    """One sampled pair, as the server knows it (never sent to the page)."""

    case_id: str  # opaque: a hash, so the URL says nothing about the arm
    position: int  # 1-based order in which reviewers see the cases
    task_id: str
    task_class: str
    arm: str
    replicate: int
    clear_is_b: bool

    @property
    def case_key(self) -> str:
        return PairCell(self.task_id, self.arm, self.replicate).case_key

    @property
    def is_control(self) -> bool:
        return self.arm == CONTROL


@dataclass(frozen=True)
class BlindCase:
    """What a reviewer sees: the judge's view of one pair, and nothing else."""

    case_id: str
    position: int
    total: int
    request: str
    reference: str
    answer_a: str
    answer_b: str


@dataclass(frozen=True)
class ReviewSample:
    """The cases of one review, in the order reviewers see them."""

    run_id: str
    judge: str  # the deciding judge whose grades the people are compared with
    seed: int
    cases: tuple[ReviewCase, ...]

    def case(self, case_id: str) -> ReviewCase | None:
        return next((c for c in self.cases if c.case_id == case_id), None)

    def to_json(self) -> str:
        data = {
            "run_id": self.run_id,
            "judge": self.judge,
            "seed": self.seed,
            "cases": [c.__dict__ for c in self.cases],
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> ReviewSample:
        try:
            data = json.loads(text)
            return cls(
                run_id=str(data["run_id"]),
                judge=str(data["judge"]),
                seed=int(data["seed"]),
                cases=tuple(ReviewCase(**c) for c in data["cases"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ReviewError(f"{source}: not a review sample ({exc})") from exc


# --------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class RunTables:
    """What the review reads from a finished calibration."""

    run_id: str
    requests: dict[str, str]  # task_id -> request_json (the cleartext body)
    references: dict[str, str]  # task_id -> reference answer
    answers: dict[tuple[str, str, int, int], AnswerRow]  # (task, arm, replicate, sample) -> row
    grades: list[GradeRow]


def _read(run_dir: Path, name: str) -> list[dict[str, Any]]:
    path = run_dir / f"{name}.parquet"
    if not path.exists():
        raise ReviewError(f"{path}: missing; is {run_dir.name!r} a finished calibration?")
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def load_run(store: Path, run_id: str, tasks_path: Path | None) -> RunTables:
    """Read a run's tables and the references of its tasks from the task file.

    The tables hold the cleartext request but not the reference, which the judge saw; the
    reference comes from the task file, and each task's content hash must match the one
    the run recorded, so the person is never shown a reference the judge did not see.
    """
    run_dir = store / "runs" / run_id
    if not run_dir.is_dir():
        raise ReviewError(f"{run_dir}: no calibration {run_id!r} in store {store}")
    tasks = cast(list[TaskRow], _read(run_dir, "tasks"))
    file_tasks = {t.id: t for t in load_tasks(tasks_path)}
    references: dict[str, str] = {}
    problems: list[str] = []
    for row in tasks:
        task = file_tasks.get(row["task_id"])
        if task is None:
            problems.append(f"task {row['task_id']!r} is not in the task file")
        elif task_hash(task) != row["content_hash"]:
            problems.append(f"task {row['task_id']!r} differs from the one the run measured")
        else:
            references[task.id] = task.reference
    if problems:
        shown = "; ".join(problems[:3]) + (
            f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        )
        raise ReviewError(
            f"{tasks_path or 'the bundled task file'}: {shown}; "
            "pass --tasks FILE, the file the run used"
        )
    answers = {
        (r["task_id"], r["arm"], int(r["replicate"]), int(r["sample"])): r
        for r in cast(list[AnswerRow], _read(run_dir, "answers"))
    }
    return RunTables(
        run_id=run_id,
        requests={r["task_id"]: r["request_json"] for r in tasks},
        references=references,
        answers=answers,
        grades=cast(list[GradeRow], _read(run_dir, "grades")),
    )


def deciding_judge(grades: Iterable[GradeRow]) -> str:
    """The judge whose grades decide: the LLM judge when there is one, else the metric."""
    names = sorted({str(r["judge"]) for r in grades})
    if not names:
        raise ReviewError("the grades table is empty: nothing to review")
    llm = [n for n in names if n != "metric"]
    return llm[0] if llm else names[0]


def first_judgements(run: RunTables, judge: str) -> list[GradeRow]:
    """The judge's valid first judgements whose two answers are both present."""
    rows = []
    for r in run.grades:
        if r["judge"] != judge or (r.get("judge_pass") or 0) != 0 or r["error"]:
            continue
        if r["grade_clear"] is None or r["grade_comp"] is None:
            continue
        if _answer_texts(run, r["task_id"], r["arm"], int(r["replicate"])) is None:
            continue
        rows.append(r)
    return rows


def _answer_texts(run: RunTables, task_id: str, arm: str, replicate: int) -> tuple[str, str] | None:
    first = run.answers.get((task_id, CLEAR, replicate, BASELINE_SAMPLE))
    second = run.answers.get((task_id, arm, replicate, SECOND_SAMPLE))
    if not first or not second or first["text"] is None or second["text"] is None:
        return None
    return first["text"], second["text"]


# --------------------------------------------------------------------------- drawing


def case_id_for(run_id: str, case_key: str) -> str:
    """An opaque, stable id: the URL of a case must not name its arm."""
    return hashlib.sha256(f"review|{run_id}|{case_key}".encode()).hexdigest()[:12]


def draw_sample(run: RunTables, size: int, *, seed: int = 0) -> ReviewSample:
    """Up to `size` pairs, stratified over classes and arms (control first), shuffled."""
    if size < 1:
        raise ReviewError(f"--sample must be at least 1, got {size}")
    judge = deciding_judge(run.grades)
    rng = random.Random(f"{run.run_id}|{seed}")
    cells: dict[str, dict[str, list[GradeRow]]] = {}
    for row in first_judgements(run, judge):
        cells.setdefault(row["task_class"], {}).setdefault(row["arm"], []).append(row)
    if not cells:
        raise ReviewError(f"calibration {run.run_id} has no graded pair of judge {judge!r}")
    queues = {cls: _class_queue(arms, rng) for cls, arms in sorted(cells.items())}
    chosen: list[GradeRow] = []
    while len(chosen) < size and any(queues.values()):
        for queue in queues.values():
            if queue and len(chosen) < size:
                chosen.append(queue.pop(0))
    rng.shuffle(chosen)
    cases = tuple(
        ReviewCase(
            case_id=case_id_for(
                run.run_id, PairCell(r["task_id"], r["arm"], int(r["replicate"])).case_key
            ),
            position=i + 1,
            task_id=r["task_id"],
            task_class=r["task_class"],
            arm=r["arm"],
            replicate=int(r["replicate"]),
            clear_is_b=swap_for(PairCell(r["task_id"], r["arm"], int(r["replicate"])).case_key),
        )
        for i, r in enumerate(chosen)
    )
    return ReviewSample(run_id=run.run_id, judge=judge, seed=seed, cases=cases)


def _class_queue(arms: dict[str, list[GradeRow]], rng: random.Random) -> list[GradeRow]:
    """One class's pairs, arms taking turns (control first), random within an arm."""
    order = sorted(arms, key=lambda arm: (arm != CONTROL, rng.random()))
    pools = {arm: rng.sample(arms[arm], len(arms[arm])) for arm in order}
    queue: list[GradeRow] = []
    while any(pools.values()):
        for arm in order:
            if pools[arm]:
                queue.append(pools[arm].pop())
    return queue


def blind_case(run: RunTables, sample: ReviewSample, case: ReviewCase) -> BlindCase:
    """The judge's view of a case: request, reference and A/B in the judge's order."""
    texts = _answer_texts(run, case.task_id, case.arm, case.replicate)
    if texts is None:
        raise ReviewError(f"case {case.case_id}: its answers are missing from the run")
    clear, second = texts
    answer_a, answer_b = (second, clear) if case.clear_is_b else (clear, second)
    body = json.loads(run.requests[case.task_id])
    return BlindCase(
        case_id=case.case_id,
        position=case.position,
        total=len(sample.cases),
        request=trim_middle(render_request_text(body), MAX_REQUEST_CHARS),
        reference=trim_middle(run.references[case.task_id], MAX_REFERENCE_CHARS),
        answer_a=trim_middle(answer_a, MAX_ANSWER_CHARS),
        answer_b=trim_middle(answer_b, MAX_ANSWER_CHARS),
    )

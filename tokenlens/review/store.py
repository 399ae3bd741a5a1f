"""Where a review lives: the sample and every grade, in the run's own store folder.

Layout under ``<store>/runs/<calibration-id>/review/``::

    sample.json                      the cases, in the order reviewers see them
    grades/<reviewer>/<case-id>.json one file per grade given

One file per grade, written atomically (temp file, fsync, rename) the moment it is given:
closing the tab or killing the server loses nothing, a regrade replaces its file whole,
and two reviewers never write the same file, so no lock is needed.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from tokenlens.policy import atomic_write_text
from tokenlens.review.sample import ReviewCase, ReviewError, ReviewSample

#: The judge's scale (tokenlens.judge: integers 0-100).
SCALE_MIN, SCALE_MAX = 0, 100
_REVIEWER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


def check_reviewer(name: str) -> str:
    """A reviewer name doubles as a folder name: letters, digits, dot, dash, underscore."""
    if not _REVIEWER.match(name):
        raise ReviewError(
            f"reviewer name {name!r}: use 1-40 letters, digits, '.', '-' or '_' "
            "(starting with a letter or digit)"
        )
    return name


class ReviewGrade(BaseModel):
    """One person's grades of one case, as shown (A and B); None means "can't tell"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reviewer: str
    case_id: str
    grade_a: int | None
    grade_b: int | None
    given_at: str

    @model_validator(mode="after")
    def _on_scale(self) -> ReviewGrade:
        for name in ("grade_a", "grade_b"):
            value = getattr(self, name)
            if value is not None and not SCALE_MIN <= value <= SCALE_MAX:
                raise ValueError(f"{name} {value} is outside the scale {SCALE_MIN}-{SCALE_MAX}")
        return self

    def for_case(self, case: ReviewCase) -> tuple[int | None, int | None]:
        """(grade of the cleartext answer, grade of the second answer)."""
        if case.clear_is_b:
            return self.grade_b, self.grade_a
        return self.grade_a, self.grade_b


class ReviewStore:
    """The sample and the grades of one calibration's review."""

    def __init__(self, store: Path, run_id: str) -> None:
        self.run_id = run_id
        self.root = store / "runs" / run_id / "review"

    @property
    def sample_path(self) -> Path:
        return self.root / "sample.json"

    def load_sample(self) -> ReviewSample | None:
        if not self.sample_path.exists():
            return None
        return ReviewSample.from_json(self.sample_path.read_text("utf-8"), str(self.sample_path))

    def save_sample(self, sample: ReviewSample) -> None:
        if self.sample_path.exists():
            raise ReviewError(f"{self.sample_path}: a sample exists already; it is never replaced")
        atomic_write_text(self.sample_path, sample.to_json())

    def _grade_path(self, reviewer: str, case_id: str) -> Path:
        return self.root / "grades" / check_reviewer(reviewer) / f"{case_id}.json"

    def record(
        self,
        sample: ReviewSample,
        reviewer: str,
        case_id: str,
        grade_a: int | None,
        grade_b: int | None,
    ) -> ReviewGrade:
        """Validate and store one grade; nothing is written when anything is wrong."""
        check_reviewer(reviewer)
        if sample.case(case_id) is None:
            raise ReviewError(f"case {case_id!r} is not in this review's sample")
        try:
            grade = ReviewGrade(
                reviewer=reviewer,
                case_id=case_id,
                grade_a=grade_a,
                grade_b=grade_b,
                given_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
        except ValidationError as exc:
            raise ReviewError(f"case {case_id}: {exc.errors()[0]['msg']}") from exc
        atomic_write_text(self._grade_path(reviewer, case_id), grade.model_dump_json() + "\n")
        return grade

    def grade(self, reviewer: str, case_id: str) -> ReviewGrade | None:
        path = self._grade_path(reviewer, case_id)
        return self._load(path) if path.exists() else None

    def reviewers(self) -> list[str]:
        folder = self.root / "grades"
        return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []

    def grades(self, reviewer: str | None = None) -> list[ReviewGrade]:
        names = [reviewer] if reviewer else self.reviewers()
        found: list[ReviewGrade] = []
        for name in names:
            folder = self.root / "grades" / check_reviewer(name)
            if folder.is_dir():
                found.extend(self._load(p) for p in sorted(folder.glob("*.json")))
        return found

    def next_ungraded(self, sample: ReviewSample, reviewer: str) -> ReviewCase | None:
        """The first case, in the sample's order, this reviewer has not graded."""
        done = {g.case_id for g in self.grades(reviewer)}
        return next((c for c in sample.cases if c.case_id not in done), None)

    @staticmethod
    def _load(path: Path) -> ReviewGrade:
        try:
            return ReviewGrade.model_validate(json.loads(path.read_text("utf-8")))
        except (ValueError, ValidationError) as exc:
            raise ReviewError(f"{path}: not a review grade ({exc})") from exc

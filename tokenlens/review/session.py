"""Opening a review: which run, its tables, and the sample (drawn once, then reused)."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pyarrow.parquet as pq

from tokenlens.judge import JUDGE_SYSTEM
from tokenlens.policy import load_policy
from tokenlens.review.app import Review
from tokenlens.review.figures import ReviewFigures, review_figures
from tokenlens.review.sample import ReviewError, ReviewSample, draw_sample, load_run
from tokenlens.review.store import ReviewStore
from tokenlens.tables import GradeRow

DEFAULT_SAMPLE = 40
DEFAULT_TOLERANCE = 0.95


def resolve_run(run: str | None, reports: Path) -> tuple[str, float | None]:
    """The run to review (default: the latest policy's run) and its tolerance when known.

    `run` may be a run id or a calibration id (its published policy names its newest run).
    """
    folder = reports / "policy"
    path = folder / "latest.json" if run is None else folder / f"{run}.json"
    if path.exists():
        policy = load_policy(path)
        return policy.run_id or policy.calibration_id, policy.tolerance
    if run is None:
        raise ReviewError(f"{path}: no published policy; name the calibration id to review")
    return run, None


def open_review(
    store: Path, run_id: str, *, tasks: Path | None, size: int | None, seed: int = 0
) -> Review:
    """The run's tables and its review sample: drawn on first use, the same one afterwards."""
    run = load_run(store, run_id, tasks)
    review_store = ReviewStore(store, run_id)
    sample = review_store.load_sample()
    if sample is None:
        sample = draw_sample(run, size or DEFAULT_SAMPLE, seed=seed)
        review_store.save_sample(sample)
    elif size is not None and size != len(sample.cases):
        raise ReviewError(
            f"{review_store.sample_path}: this run's review sample has {len(sample.cases)} "
            f"cases; it is kept so grades stay comparable (omit --sample to continue it)"
        )
    return Review(run=run, sample=sample, store=review_store, instructions=JUDGE_SYSTEM)


def load_figures(store: Path, run_id: str, *, tolerance: float) -> ReviewFigures:
    """Agreement figures of a run's review from what is stored (no task file needed)."""
    review_store = ReviewStore(store, run_id)
    sample = review_store.load_sample()
    if sample is None:
        raise ReviewError(f"{review_store.sample_path}: no review of {run_id} yet")
    grades_path = store / "runs" / run_id / "grades.parquet"
    if not grades_path.exists():
        raise ReviewError(f"{grades_path}: missing; is {run_id!r} a finished calibration?")
    run_grades = cast(list[GradeRow], pq.read_table(grades_path).to_pylist())
    return review_figures(sample, review_store.grades(), run_grades, tolerance=tolerance)


__all__ = ["DEFAULT_SAMPLE", "ReviewSample", "load_figures", "open_review", "resolve_run"]

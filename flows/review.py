"""The `review-summary` Prefect flow: the review's agreement figures as UI artifacts.

Thin on purpose: `tokenlens.review` computes everything; this only publishes it, so the
judge-vs-people figures sit in the Prefect UI next to the calibration's own artifacts.
`tokenlens review --summary --artifact` runs it (in-process, or against PREFECT_API_URL).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from tokenlens.review import poor_agreement
from tokenlens.review.session import load_figures
from tokenlens.review.summary import class_records, summary_markdown

KEY_AGREEMENT = "review-agreement"
KEY_CLASSES = "review-agreement-classes"


@flow(name="review-summary", log_prints=True)
def review_summary(store: str, run_id: str, tolerance: float) -> dict[str, Any]:
    """Publish the judge-vs-people figures of a calibration's review."""
    figures = load_figures(Path(store), run_id, tolerance=tolerance)
    create_markdown_artifact(
        markdown=summary_markdown(figures),
        key=KEY_AGREEMENT,
        description=f"Judge vs people on the reviewed cases of calibration {run_id}.",
    )
    create_table_artifact(
        table=class_records(figures),
        key=KEY_CLASSES,
        description="Per class: Krippendorff's alpha (judge vs people) with its 95 % interval.",
    )
    return {"run_id": run_id, "poor": poor_agreement(figures)}

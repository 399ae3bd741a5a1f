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
    markdown = summary_markdown(figures)
    create_markdown_artifact(
        markdown=markdown,
        key=KEY_AGREEMENT,
        description=f"Judge vs people on the reviewed cases of calibration {run_id}.",
    )
    create_table_artifact(
        table=class_records(figures),
        key=KEY_CLASSES,
        description="Per class: Krippendorff's alpha (judge vs people) with its 95 % interval.",
    )
    attached = attach_to_calibration(store, run_id, markdown)
    return {"run_id": run_id, "poor": poor_agreement(figures), "calibration_flow_run": attached}


def attach_to_calibration(store: str, run_id: str, markdown: str) -> str | None:
    """The same figures on the calibration's own flow run (its manifest names it), so the
    Prefect UI shows them where the run's policy and report are. None when the run had no
    flow run (a plain CLI run) or that flow run is gone from this Prefect server."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactCreate
    from prefect.exceptions import ObjectNotFound

    from tokenlens.calibration.runs import manifest_path, read_manifest
    from tokenlens.errors import TokenLensError

    try:
        flow_run_id = read_manifest(manifest_path(store, run_id)).flow_run_id
    except TokenLensError:
        return None
    if flow_run_id is None:
        return None
    with get_client(sync_client=True) as client:
        try:
            client.read_flow_run(UUID(flow_run_id))
        except ObjectNotFound:
            return None
        client.create_artifact(
            ArtifactCreate(
                key=KEY_AGREEMENT,
                type="markdown",
                data=markdown,
                description=f"Judge vs people on the reviewed cases of calibration {run_id}.",
                flow_run_id=UUID(flow_run_id),
            )
        )
    return flow_run_id

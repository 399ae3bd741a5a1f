"""`tokenlens review --artifact` publishes the figures as Prefect artifacts (the UI's view)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

import pytest

from tokenlens.cli import main as cli_main
from tokenlens.review.session import open_review

from .conftest import LoopbackRun

pytestmark = pytest.mark.slow


def test_artifacts_hold_the_summary_and_the_class_table(
    prefect_api: str, run_copy: LoopbackRun, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.review import KEY_AGREEMENT, KEY_CLASSES

    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=6)
    for index, case in enumerate(review.sample.cases):
        review.store.record(review.sample, "ana", case.case_id, 10 * index, 90 - 10 * index)
    args = ["review", "--artifact", "--store", str(run_copy.store)]
    assert cli_main([*args, "--reports", str(run_copy.config.reports)]) == 0
    out = capsys.readouterr().out
    assert "published as Prefect artifacts review-agreement" in out

    with get_client(sync_client=True) as client:
        found = {
            a.key: a
            for a in client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    key=ArtifactFilterKey(any_=[KEY_AGREEMENT, KEY_CLASSES])
                )
            )
        }
    markdown = found[KEY_AGREEMENT]
    assert markdown.type == "markdown" and "Judge claude-haiku-4-5 vs people" in str(markdown.data)
    assert f"Review of calibration {run_copy.run_id}" in str(markdown.data)
    table = found[KEY_CLASSES]
    assert table.type == "table"
    assert "extraction" in str(table.data) and "alpha_high" in str(table.data)


def test_the_figures_also_sit_on_the_calibrations_own_flow_run(
    prefect_api: str, run_copy: LoopbackRun
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
    from prefect.runtime import flow_run

    from flows.review import KEY_AGREEMENT, review_summary
    from tokenlens.calibration.runs import (
        RunManifest,
        manifest_path,
        read_manifest,
        write_manifest,
    )

    @flow(name="stand-in-calibration")
    def calibration() -> str:
        return str(flow_run.id)

    calibration_run = calibration()
    path = manifest_path(str(run_copy.store), run_copy.run_id)
    manifest = (
        read_manifest(path)
        if path.exists()
        else RunManifest(
            run_id=run_copy.run_id,
            calibration_id=run_copy.run_id,
            seed=0,
            fresh_sample=False,
            created=datetime.now(UTC),
            config={},
        )
    )
    write_manifest(
        str(run_copy.store), manifest.model_copy(update={"flow_run_id": calibration_run})
    )
    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=6)
    for index, case in enumerate(review.sample.cases):
        review.store.record(review.sample, "bo", case.case_id, 10 * index, 90 - 10 * index)
    result = review_summary(str(run_copy.store), run_copy.run_id, 0.95)
    assert result["calibration_flow_run"] == calibration_run

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(calibration_run)])
            )
        )
    assert [a.key for a in found] == [KEY_AGREEMENT]
    assert f"Review of calibration {run_copy.run_id}" in str(found[0].data)

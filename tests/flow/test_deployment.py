"""The README's deployment path, scripted: work pool, `prefect deploy --all`, a run of
`calibrate/nightly`, a process worker with `--run-once`; the run completes with artifacts.

The nightly's parameters are overridden at run time (small task subset, a temporary
store), and the worker's environment points the Anthropic backend at the loopback server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flows.calibrate import KEY_CURVE, KEY_POLICY
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
POOL = "tokenlens"


def prefect_cli(args: list[str], env: dict[str, str], timeout: float = 240) -> str:
    done = subprocess.run(
        [PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_deploy_run_and_work_the_nightly(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_api,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
    }
    prefect_cli(["work-pool", "create", POOL, "--type", "process", "--overwrite"], env)
    prefect_cli(["--no-prompt", "deploy", "--all"], env)

    config = make_config(classes=("extraction",), repeats=1)
    params = {"config": json.loads(config.model_dump_json())}
    out = prefect_cli(
        ["deployment", "run", "calibrate/nightly", "--params", json.dumps(params)], env
    )
    assert "calibrate/nightly" in out
    prefect_cli(["worker", "start", "--pool", POOL, "--run-once"], env, timeout=400)

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
        DeploymentFilter,
        DeploymentFilterName,
    )

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=["nightly"]))
        )
        assert len(runs) >= 1
        run = max(runs, key=lambda r: r.created or 0)
        assert run.state is not None and run.state.is_completed(), run.state
        deployment = client.read_deployment(run.deployment_id)  # type: ignore[arg-type]
        assert deployment.work_pool_name == POOL
        assert [s.schedule.cron for s in deployment.schedules] == ["30 2 * * *"]  # type: ignore[union-attr]
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]),
                key=ArtifactFilterKey(any_=[KEY_POLICY, KEY_CURVE]),
            )
        )
    assert {a.key for a in artifacts} == {KEY_POLICY, KEY_CURVE}
    assert (config.reports / "policy" / "latest.json").is_file()
    assert anthropic.calls(), "the deployed run answered through the loopback server"

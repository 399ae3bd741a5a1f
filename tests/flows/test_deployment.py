"""The deployment path of docs/schedule.md, scripted: work pool, `prefect deploy --all`, a run of
`calibrate/nightly`, a process worker with `--run-once`.

The run overrides one setting the docs' way (`--param repeats=1`) on top of what keeps
the test small and isolated (a task subset and a temporary store, given with `--params`);
every other setting, `max_spend` and `judge: both` included, must keep the deployment's
value. Two tasks cannot certify anything, so the run must end Failed, naming the class,
after publishing its policy, report and artifacts. The worker's environment points the
Anthropic backend at the loopback server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flows.calibrate import KEY_CURVE, KEY_POLICY, KEY_REPORT
from tokenlens.calibration.runs import list_runs
from tokenlens.policy import load_policy
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


def test_nightly_override_one_parameter_and_fail_loudly(
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

    config = make_config(classes=("extraction",), methods=("safe", "prune"))
    isolation = {
        "classes": list(config.classes),
        "max_tasks_per_class": config.max_tasks_per_class,
        "methods": list(config.methods),
        "rates": list(config.rates),
        "max_tokens": config.max_tokens,
        "store": str(config.store),
        "reports": str(config.reports),
    }
    out = prefect_cli(
        [
            "deployment", "run", "calibrate/nightly",
            "--params", json.dumps(isolation), "--param", "repeats=1",
        ],
        env,
    )  # fmt: skip
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
        deployment = client.read_deployment(run.deployment_id)  # type: ignore[arg-type]
        assert deployment.work_pool_name == POOL
        assert [s.schedule.cron for s in deployment.schedules] == ["30 2 * * *"]  # type: ignore[union-attr]
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]),
                key=ArtifactFilterKey(any_=[KEY_POLICY, KEY_CURVE, KEY_REPORT]),
            )
        )

    # The override took, and every other setting kept the deployment's value.
    nightly = deployment.parameters
    assert run.parameters["repeats"] == 1 != nightly["repeats"]
    kept = ("max_spend", "judge", "model", "backend", "tolerance", "mode", "fresh_sample", "design")
    for name in kept:
        assert run.parameters[name] == nightly[name], name
    assert nightly["max_spend"] == 5.0 and nightly["judge"] == "both"
    assert nightly["design"] == "sequential"  # a class stops paying once it is decided
    # ...and the flow ran with them: the run's manifest records what it used.
    [manifest] = list_runs(config.store)
    used = manifest.config
    assert used["max_spend"] == 5.0 and used["judge"] == "both" and used["repeats"] == 1
    assert used["design"] == "sequential"
    assert manifest.fresh_sample and manifest.flow_run_id == str(run.id)
    assert [r for r in anthropic.calls() if r.is_judge], "judge: both kept its LLM judge"

    # Loud failure: Failed, naming the class, after everything was published.
    assert run.state is not None and run.state.is_failed(), run.state
    assert "extraction" in (run.state.message or ""), run.state.message
    latest = load_policy(Path(config.reports) / "policy" / "latest.json")
    assert latest.run_id == manifest.run_id and latest.classes["extraction"].verdict == "none"
    assert {a.key for a in artifacts} == {KEY_POLICY, KEY_CURVE, KEY_REPORT}
    # What the docs' automation (automations/calibration-failed.yaml) reacts to.
    assert failed_event_flows(prefect_api, str(run.id)) == ["calibrate"]


def failed_event_flows(api: str, flow_run_id: str) -> list[str]:
    """Names of the flows related to the flow run's `prefect.flow-run.Failed` event."""
    import httpx

    query = {
        "filter": {
            "event": {"name": ["prefect.flow-run.Failed"]},
            "any_resource": {"id": [f"prefect.flow-run.{flow_run_id}"]},
        },
        "limit": 5,
    }
    found: list[dict[str, Any]] = []
    for _ in range(50):  # events reach the store asynchronously
        reply = httpx.post(f"{api}/events/filter", json=query, timeout=10)
        reply.raise_for_status()
        found = reply.json()["events"]
        if found:
            break
        time.sleep(0.2)
    return [
        r["prefect.resource.name"]
        for event in found
        for r in event["related"]
        if r.get("prefect.resource.role") == "flow"
    ]

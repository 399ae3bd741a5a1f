"""A worker restart does not kill a running calibration (issue 26, point 1).

Real processes throughout: the session's Prefect server, the repository's deployments
(`prefect deploy --all`), a `prefect worker start` process that takes a `calibrate/nightly`
run, and the loopback Anthropic server answering slowly enough that the run is mid-way
when the worker goes. The worker alone is signalled (it runs in its own session; its flow
run's process is not signalled by the test), as a supervisor restarting it would. Then a
new worker starts, as after a restart.

- SIGKILL (or the OOM killer): the flow run's process keeps running and finishes the run:
  same pid, one attempt, Completed. Before, its output went through a pipe to the dead
  worker and its next log line died of a broken pipe (Crashed); prefect.yaml now says
  `stream_output: false`. The run writes log lines after the kill
  (`PREFECT_LOGGING_LEVEL=INFO`, an operator's default).
- SIGTERM, then SIGKILL if the worker is still there 10 s later (`docker stop`; systemd
  does the same after its stop timeout). Prefect's worker either ignores the SIGTERM or
  stops gracefully, and then kills the flow runs it started and exits without recording
  anything: the run was left `Running` with no process, for good. Now either the flow
  run's process outlives the worker (as above), or its heartbeats stop, the README's
  automation (automations/calibration-resubmit.yaml, created here with a 45 s window
  instead of 10 minutes) sets it back to Scheduled and the restarted worker resumes it: the
  same run, a second attempt. Either way: Completed, no answer paid twice beyond the one
  in flight (concurrency 1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenlens.calibration.runs import list_runs
from tokenlens.processes import process_alive
from tokenlens.storage import location, read_parquet
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.workers import (
    REPO,
    deploy,
    flow_run_processes,
    kill_tree,
    prefect_cli,
    start_worker,
    wait_for,
    worker_env,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


RESUBMIT = REPO / "automations" / "calibration-resubmit.yaml"


@pytest.fixture(scope="module")
def deployed(prefect_api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The deployments, and the resubmit automation (45 s without a heartbeat)."""
    from prefect.client.orchestration import get_client

    env = worker_env(prefect_api)
    deploy(env)
    spec = yaml.safe_load(RESUBMIT.read_text())
    assert spec["trigger"]["within"] == 600
    spec["trigger"]["within"] = 45  # prefect.yaml: a heartbeat every 30 s
    spec["name"] += "-test"
    path = tmp_path_factory.mktemp("automation") / "resubmit.yaml"
    path.write_text(yaml.safe_dump(spec))
    prefect_cli(["automation", "create", "--from-file", str(path)], env)
    try:
        yield prefect_api
    finally:
        with get_client(sync_client=True) as client:
            for automation in client.read_automations_by_name(spec["name"]):
                client.delete_automation(automation.id)


@pytest.fixture
def workers() -> Iterator[list[Any]]:
    """Every worker a test starts, and the flow-run processes they started: all killed
    at the end, whatever the test did."""
    started: list[Any] = []
    yield started
    for worker in started:
        runs = flow_run_processes(worker.pid)
        if worker.poll() is None:
            kill_tree(worker)
        for pid in runs:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("restart", ["SIGKILL", "SIGTERM"])
def test_a_worker_restart_leaves_a_running_calibration_running(
    deployed: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    workers: list[Any],
    tmp_path: Path,
    restart: str,
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    # 16 answers, one at a time: ~24 s of work, so some is left after a SIGTERM's 10 s.
    anthropic.configure(latency_s=1.5)
    env = worker_env(deployed, PREFECT_LOGGING_LEVEL="INFO")
    first = start_worker("restart-before", env, log=tmp_path / "worker-1.log")
    workers.append(first)
    config = make_config(classes=("extraction",), methods=("safe", "prune"), concurrency=1)
    params = {
        "classes": list(config.classes),
        "max_tasks_per_class": config.max_tasks_per_class,
        "methods": list(config.methods),
        "rates": list(config.rates),
        "repeats": config.repeats,
        "judge": "metric",
        "concurrency": 1,
        "store": str(config.store),
        "reports": str(config.reports),
        "fail_on_unresolved": False,
    }
    run: FlowRun = run_deployment("calibrate/nightly", parameters=params, timeout=0)  # type: ignore[assignment]

    def flow_process() -> int | None:
        paid = [r for r in anthropic.calls() if r.status == 200]
        found = flow_run_processes(first.pid)
        return found[0] if found and len(paid) >= 3 else None

    victim = wait_for(flow_process, 240, "the worker's flow run to pay for 3 answers")
    os.kill(first.pid, getattr(signal, restart))
    try:
        first.wait(timeout=10)
    except subprocess.TimeoutExpired:  # after SIGTERM: the supervisor's SIGKILL
        first.kill()
        first.wait(timeout=30)
    paid_at_restart = len([r for r in anthropic.calls() if r.status == 200])
    second = start_worker("restart-after", env)  # the restarted worker
    workers.append(second)

    def final() -> Any:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(run.id).state
        return state if state is not None and state.is_final() else None

    state = wait_for(final, 240, lambda: f"the flow run to end: {_story(run.id, victim)}")
    assert state.is_completed(), f"{state.type.value}: {state.message}"
    [manifest] = list_runs(config.store)
    with get_client(sync_client=True) as client:
        run_count = client.read_flow_run(run.id).run_count
    paid = [r for r in anthropic.calls() if r.status == 200 and not r.is_judge]
    assert len(paid) > paid_at_restart  # work was left after the restart
    assert manifest.status == "finished"
    if restart == "SIGKILL" or manifest.attempts == 1:
        # The process the dead worker had started finished the run: no second attempt.
        assert (manifest.pid, manifest.attempts, run_count) == (victim, 1, 1)
    else:
        # Resubmitted (no heartbeat), resumed by the next worker: the same run.
        assert (manifest.attempts, run_count) == (2, 2) and manifest.pid != victim
    answers = read_parquet(location(config.store).child("runs", manifest.run_id, "answers.parquet"))
    keys = {row["call_key"] for row in answers.to_pylist()}
    assert len(keys) <= len(paid) <= len(keys) + 1  # from the ledger: at most one in flight


def _story(flow_run_id: Any, victim: int) -> str:
    """What a stuck flow run did: its states and last log lines (for a failure message)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        states = client.read_flow_run_states(flow_run_id)
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    lines = [f"{s.type.value} {s.name}: {s.message}" for s in states]
    lines += [log.message[:300] for log in logs[-15:]]
    return f"process {victim} alive: {process_alive(victim)}\n" + "\n".join(lines)

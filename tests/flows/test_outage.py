"""An outage fails fast and says why: the nightly deployment, run by a real worker, with
the Anthropic upstream on a port that refuses every connection.

Real processes throughout: the session's Prefect server, `prefect deploy --all`, a
`prefect worker start` process running `calibrate/nightly` (sequential design, its
default retry policy: six attempts with backoff per call), the README's failure
automation notifying a webhook on loopback, and a policy in force to carry over.

Without a circuit breaker each call spent its whole backoff (~30 s) before the next
began, so the run stayed Running for many minutes and its carried reason blamed the
answers. Now the breaker opens once every attempt has failed for its window, the calls
still waiting stop, and the run ends Failed naming the refused address: in its state, its
log, the notification and the carried policy's reason.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.flows.conftest import wait_for_messages
from tests.policies import publish_certified
from tokenlens.calibration.runs import list_runs
from tokenlens.policy import load_policy
from tokenlens.testing.workers import (
    deploy,
    kill_tree,
    start_worker,
    wait_for,
    worker_env,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def worker(prefect_api: str, closed_port: int, tmp_path: Path) -> Iterator[Any]:
    env = worker_env(
        prefect_api,
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{closed_port}",
        ANTHROPIC_API_KEY="sk-ant-test-dummy",
    )
    deploy(env)
    process = start_worker("outage", env, log=tmp_path / "worker.log")
    yield process
    kill_tree(process)  # and the flow run it started, if it is still there


def test_an_unreachable_upstream_stops_the_nightly_with_its_cause(
    prefect_api: str,
    notifications: list[dict[str, Any]],
    worker: Any,
    closed_port: int,
    make_config: Any,
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.deployments import run_deployment

    config = make_config(classes=("extraction",), methods=("safe", "prune"), max_tasks_per_class=20)
    good = publish_certified(config, datetime.now(UTC) - timedelta(days=1))
    params = {
        "classes": list(config.classes),
        "max_tasks_per_class": config.max_tasks_per_class,
        "methods": list(config.methods),
        "rates": list(config.rates),
        "store": str(config.store),
        "reports": str(config.reports),
    }
    run = run_deployment("calibrate/nightly", parameters=params, timeout=0)
    cause = f"connection refused to http://127.0.0.1:{closed_port}"

    def final() -> Any:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(run.id).state  # type: ignore[union-attr]
        return state if state is not None and state.is_final() else None

    # Two minutes from the deployment run's creation, worker start-up included.
    state = wait_for(final, 120, "the flow run to end")
    assert state.is_failed(), f"{state.type.value}: {state.message}"
    message = state.message or ""
    assert "circuit breaker open" in message and cause in message, message

    def run_log() -> str:
        with get_client(sync_client=True) as client:
            logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))  # type: ignore[union-attr]
        text = "\n".join(log.message for log in logs)
        return text if "the run stops" in text else ""

    logged = wait_for(run_log, 60, "the run's log to hold why it stopped")  # written async
    assert "the run stops, nothing measured: circuit breaker open" in logged, logged[-2000:]
    assert cause in logged

    # The notification says why.
    [notice] = wait_for_messages(notifications, 1, timeout=60)
    assert notice["subject"].startswith("TokenLens calibration Failed")
    assert cause in notice["body"], notice

    # The policy in force stays, carried over, and its reason names the cause.
    latest = load_policy(Path(config.reports) / "policy" / "latest.json")
    carried = latest.classes["extraction"].carried_over
    assert carried is not None and carried.from_run == good.run_id
    assert cause in carried.why and "circuit breaker" in carried.why

    # The retries ran beneath the breaker (their warnings reach the run's log), and the
    # run stopped because it opened: recorded stopped, its remaining calls never made.
    assert "failed (ModelCallError); retry 1/5" in logged
    assert "the remaining calls were not made" in message
    [manifest] = list_runs(config.store)
    assert manifest.status == "stopped"

"""What the parent reads of a shard: the result of its last attempt (fanout.py).

A shard killed after it recorded its result but before its Completed state reached the
server is resubmitted and records a second result; the parent must report the attempt
that finished (CI once reported the killed worker as the shard's launcher).
"""

from __future__ import annotations

import time

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import ArtifactCreate

from tokenlens.calibration.fanout import KEY_SHARD, _shard_result


@flow(name="shard-result-probe")
def _probe() -> None:
    """Never run: only a flow run to hang artifacts on."""


def test_a_resubmitted_shard_reports_its_last_attempt(prefect_api: str) -> None:
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_probe)
        assert _shard_result(client, run.id) is None
        for attempt, launcher in ((1, 111), (2, 222)):
            client.create_artifact(
                ArtifactCreate(
                    key=KEY_SHARD,
                    type="table",
                    data=[{"attempt": attempt, "launcher_pid": launcher}],
                    flow_run_id=run.id,
                )
            )
            time.sleep(0.05)  # distinct creation times
        result = _shard_result(client, run.id)
    assert result == {"attempt": 2, "launcher_pid": 222}

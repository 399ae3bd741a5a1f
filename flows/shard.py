"""The `calibrate-shard` Prefect flow: one shard of a calibration's paid work, on any worker.

Started by the `calibrate` flow (parameter `shards`) through the `calibrate-shard/shard`
deployment, never by hand: its parameters are the parent run's settings, ids and the
shard's tasks. It pays for its tasks' answer and judge calls into the shared ledger and
records what it did (and on which host and process) in the `calibration-shard` artifact;
the parent reads that, then aggregates and publishes. The logic is in
`tokenlens.calibration.shards` (plain) and `tokenlens.calibration.fanout` (Prefect).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from tokenlens.calibration.call_limits import LimitedClient, existing_limits, limit_name
from tokenlens.calibration.context import judge_name_for
from tokenlens.calibration.fanout import KEY_SHARD
from tokenlens.calibration.shards import ShardSpec, open_shard, pay_shard
from tokenlens.config import CalibrationConfig
from tokenlens.models.base import ModelClient


@flow(name="calibrate-shard", log_prints=True)
def calibrate_shard(
    config: dict[str, Any],
    run_id: str,
    calibration_id: str,
    shard: int,
    shards: int,
    task_ids: list[str],
) -> dict[str, Any]:
    """Pay for one shard of a calibration run (answers and judge calls, into the ledger).

    Args:
        config: the parent run's settings (its sample seed included).
        run_id: the parent's run id.
        calibration_id: the parent's calibration id (checked against this worker's view).
        shard: this shard's index, from 0.
        shards: how many shards the run has.
        task_ids: the tasks this shard pays for.
    """
    logger = get_run_logger()
    settings = CalibrationConfig.model_validate(config)
    spec = ShardSpec(shard, shards, tuple(task_ids))

    def limited(client: ModelClient) -> ModelClient:
        model = str(getattr(client, "model", None) or settings.model)
        models = {model, judge_name_for(settings, model)} - {"metric"}
        found = existing_limits(models)
        for name in sorted(models - found):
            logger.info("no global limit %s: this worker's calls are bounded only by "
                        "concurrency=%d", limit_name(name), settings.concurrency)  # fmt: skip
        return LimitedClient(client, found) if found else client

    cal, tasks = open_shard(
        settings, spec, run_id=run_id, calibration_id=calibration_id, wrap_client=limited
    )
    logger.info("%s of run %s: %d tasks", spec.label, run_id, len(tasks))
    try:
        result = pay_shard(cal, spec, tasks).model_dump()
    finally:
        cal.calls.close()
    create_table_artifact(
        table=[result],
        key=KEY_SHARD,
        description=f"{spec.label} of run {run_id}: where it ran and what it paid for.",
    )
    logger.info(
        "%s: %d new calls ($%.4f) on %s pid %d",
        spec.label,
        result["new_calls"],
        result["spent_usd"],
        result["host"],
        result["pid"],
    )
    return result

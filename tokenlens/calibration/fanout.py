"""Running a calibration's shards on a Prefect work pool.

The parent flow starts one flow run of the `calibrate-shard` deployment per shard with
`run_deployment` (linked to it as subflow runs), so any worker of the deployment's pool
can take any shard; it then polls their states until all are final.

- A shard that crashed (its process killed, or its machine lost) is resubmitted: the
  parent puts the same flow run back to `Scheduled` (AwaitingRetry), any worker takes it,
  and it pays only for what the ledger lacks; after `retries` resubmissions the run fails
  naming it. A machine that vanished leaves its shard `Running` with no process: the
  parent treats a shard that sent no sign of life (Prefect's flow run heartbeat,
  `PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, or a state change) for `lost_after` seconds as
  lost and marks it `Crashed` first (a running shard that never sent a heartbeat, e.g.
  with heartbeats turned off, is never judged lost: the parent then waits for it). A shard
  left `Pending` for `lost_after` seconds is lost too: the worker that took it died before
  its flow started (a process worker starts one in seconds).
- The parent watches its own flow run too: cancelled (from the UI, `prefect flow-run
  cancel`), or interrupted in any way while it waits (a worker's SIGTERM on cancel), it
  cancels every shard that has not finished before it stops.

The limits the shards' calls share: `tokenlens.calibration.call_limits`.

This module imports Prefect; the plain shard logic is `tokenlens.calibration.shards`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast
from uuid import UUID

from tokenlens.calibration.call_limits import ensure_call_limits
from tokenlens.calibration.context import Calibration, judge_name_for
from tokenlens.calibration.result import ShardResult, ShardRun
from tokenlens.calibration.shards import ShardError, ShardSpec, plan_shards
from tokenlens.tasks import CalibrationTask

#: Artifact in which each shard run records its `ShardResult` (read back by the parent).
KEY_SHARD = "calibration-shard"


@dataclass(frozen=True)
class FanOutSettings:
    """How a run is split over a work pool (the `calibrate` flow's shard parameters)."""

    shards: int
    deployment: str
    calls_limit: int | None
    lost_after: float
    retries: int = 2


def pay_with_shards(
    cal: Calibration, tasks: list[CalibrationTask], settings: FanOutSettings, *, log: Any
) -> list[ShardRun]:
    """Ensure the call limits, run the run's shards on the pool; what each shard did.

    What is left of the run's spend cap is shared out evenly: each shard gets `(max_spend
    - spent so far) / shards` (an attempt of a resubmitted shard gets its share again).
    """
    check_deployment(settings.deployment, log=log)
    if settings.calls_limit is not None:
        models = {cal.model, judge_name_for(cal.config, cal.model)} - {"metric"}
        names = ensure_call_limits(models, settings.calls_limit)
        log.info("global limits %s: %d calls in flight", ", ".join(names), settings.calls_limit)
    specs = plan_shards(tasks, settings.shards)
    config = cal.config
    if config.max_spend is not None:
        cal.calls.spend.check()  # nothing left of the cap: stop before any shard starts
        left = config.max_spend - cal.calls.spend.carried - cal.calls.spend.spent
        config = config.model_copy(update={"max_spend": left / len(specs)})
    common = {
        "config": config.model_dump(mode="json"),
        "run_id": cal.store.run_id,
        "calibration_id": cal.calibration_id,
    }
    runs = run_shards(
        settings.deployment,
        specs,
        common,
        lost_after=settings.lost_after,
        retries=settings.retries,
        parent=_own_flow_run(),
        log=log,
    )
    return [
        ShardRun(
            shard=run.spec.index,
            flow_run=run.name,
            flow_run_id=str(run.flow_run_id),
            result=ShardResult.model_validate(run.result) if run.result else None,
        )
        for run in runs
    ]


@dataclass(frozen=True)
class _Final:
    """A shard's flow run in its final state, as the parent saw it."""

    spec: ShardSpec
    flow_run_id: UUID
    name: str
    state: str
    message: str
    result: dict[str, Any] | None


def check_deployment(deployment: str, *, log: Any = None) -> None:
    """Raise `ShardError` when the shard deployment is missing; warn when its pool has no
    worker online (the shards then wait, Scheduled, until one starts)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    with get_client(sync_client=True) as client:
        try:
            found = client.read_deployment_by_name(deployment)
        except ObjectNotFound:
            raise ShardError(
                f"shards: no deployment {deployment!r} on the Prefect API "
                f"{PREFECT_API_URL.value() or '(temporary server)'}: create it with "
                "`prefect --no-prompt deploy --all` and start a worker of its pool "
                '(README, "Many machines")'
            ) from None
        pool = found.work_pool_name
        if pool is None or log is None:
            return
        workers = client.read_workers_for_work_pool(pool)
        if not any(str(worker.status).upper().endswith("ONLINE") for worker in workers):
            log.warning(
                "no worker of pool %s is online: the shards wait (Scheduled) until one "
                "starts (`prefect worker start --pool %s`)",
                pool,
                pool,
            )


def _own_flow_run() -> UUID | None:
    from prefect.runtime import flow_run

    value = flow_run.get_id()
    return UUID(str(value)) if value else None


@dataclass
class _Shard:
    """A shard's flow run while the parent waits for it."""

    spec: ShardSpec
    name: str
    resubmitted: int = 0


def run_shards(
    deployment: str,
    specs: list[ShardSpec],
    parameters: dict[str, Any],
    *,
    lost_after: float,
    retries: int = 2,
    parent: UUID | None = None,
    poll: float = 2.0,
    log: Any = None,
) -> list[_Final]:
    """Start one flow run of `deployment` per shard, wait for all; raise if any failed.

    `parameters` are the shard flow's parameters common to all shards; each run adds its
    spec. A crashed shard is resubmitted up to `retries` times. Raises `ShardError` naming
    every shard that did not complete; `ShardsCancelled` when the `parent` flow run is
    cancelled. Whatever ends the wait early, unfinished shards are cancelled.
    """
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    started: dict[UUID, _Shard] = {}
    try:
        for spec in specs:
            run = cast(
                FlowRun,
                run_deployment(  # sync call: async_dispatch returns the value
                    deployment,
                    parameters={
                        **parameters,
                        "shard": spec.index,
                        "shards": spec.count,
                        "task_ids": list(spec.task_ids),
                    },
                    flow_run_name=f"{parameters['run_id']}-shard-{spec.index + 1}-of-{spec.count}",
                    timeout=0,
                    tags=["tokenlens", "calibration-shard"],
                ),
            )
            started[run.id] = _Shard(spec, run.name)
            if log is not None:
                log.info("%s: flow run %s (%s)", spec.label, run.name, run.id)
        finals = _wait(
            started, lost_after=lost_after, retries=retries, parent=parent, poll=poll, log=log
        )
    except BaseException:
        cancel_shards(started, log=log)
        raise
    failed = [run for run in finals if run.state != "COMPLETED"]
    if failed:
        listed = "; ".join(
            f"{run.spec.label} ({run.name}, {len(run.spec.task_ids)} tasks): "
            f"{run.state}{' - ' + run.message if run.message else ''}"
            for run in failed
        )
        raise ShardError(
            f"{len(failed)} of {len(finals)} shards did not complete: {listed}. The calls "
            "they paid for are in the ledger: rerun (or resume) to pay only for the rest."
        )
    return finals


class ShardsCancelled(ShardError):
    """The parent flow run was cancelled while its shards ran (they are cancelled too)."""

    exit_code = 130  # interrupted, as by Ctrl-C: not bad input


def cancel_shards(started: dict[UUID, _Shard], *, log: Any = None) -> list[UUID]:
    """Cancel every shard flow run that has not finished; returns the ones cancelled.

    A running (or starting) shard goes to `Cancelling`, so its worker stops its process;
    one still waiting for a worker is `Cancelled` at once."""
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled, Cancelling

    cancelled = []
    with get_client(sync_client=True) as client:
        for run_id, shard in started.items():
            try:
                state = client.read_flow_run(run_id).state
                if state is None or state.is_final() or state.is_cancelling():
                    continue
                message = "its parent calibration run stopped (cancelled or interrupted)"
                # Waiting for a worker: nobody to stop, so Cancelled at once.
                stop = Cancelled if state.is_scheduled() else Cancelling
                client.set_flow_run_state(run_id, stop(message=message), force=True)
            except Exception as exc:  # keep cancelling the others; say which one failed
                if log is not None:
                    log.warning("%s: could not be cancelled (%s)", shard.spec.label, exc)
                continue
            cancelled.append(run_id)
            if log is not None:
                log.warning("%s: cancelled (%s)", shard.spec.label, shard.name)
    return cancelled


def _wait(
    started: dict[UUID, _Shard],
    *,
    lost_after: float,
    retries: int,
    parent: UUID | None,
    poll: float,
    log: Any,
) -> list[_Final]:
    from prefect.client.orchestration import get_client

    final: dict[UUID, _Final] = {}
    with get_client(sync_client=True) as client:
        while len(final) < len(started):
            _check_parent(client, parent)
            for run_id, shard in started.items():
                if run_id not in final:
                    done = _look(client, run_id, shard, lost_after, retries, log)
                    if done is not None:
                        final[run_id] = done
            if len(final) < len(started):
                time.sleep(poll)
    return [final[run_id] for run_id in started]


def _check_parent(client: Any, parent: UUID | None) -> None:
    """Raise `ShardsCancelled` once the parent flow run is being cancelled."""
    if parent is None:
        return
    state = client.read_flow_run(parent).state
    if state is not None and (state.is_cancelling() or state.is_cancelled()):
        raise ShardsCancelled("the calibration run was cancelled; its shards are cancelled")


def _look(
    client: Any, run_id: UUID, shard: _Shard, lost_after: float, retries: int, log: Any
) -> _Final | None:
    """One look at a shard: its final result, or None while it runs (or was resubmitted)."""
    from prefect.states import AwaitingRetry, Crashed

    spec = shard.spec
    state = client.read_flow_run(run_id).state
    if state is not None and (state.is_running() or state.is_pending()):
        alive = _last_heartbeat(client, run_id)
        if alive is None and state.is_running():
            return None  # no heartbeat yet (or heartbeats off): nothing to judge by
        since = state.timestamp if alive is None else max(alive, state.timestamp)
        silent = (datetime.now(UTC) - since).total_seconds()
        if silent <= lost_after:
            return None
        if state.is_pending():  # a worker took it and vanished before its flow started
            message = f"pending for {silent:.0f} s (limit {lost_after:.0f} s): its worker is gone"
        else:
            message = (
                f"no heartbeat for {silent:.0f} s (limit {lost_after:.0f} s): its worker is gone"
            )
        state = Crashed(message=message)
        client.set_flow_run_state(run_id, state, force=True)
        if log is not None:
            log.warning("%s: %s", spec.label, message)
    if state is None or not state.is_final():
        return None  # scheduled or pending: waiting for a worker is not a loss
    if state.is_crashed() and shard.resubmitted < retries:
        shard.resubmitted += 1
        why = state.message or "crashed"
        client.set_flow_run_state(
            run_id,
            AwaitingRetry(
                scheduled_time=datetime.now(UTC),
                message=f"resubmitted ({shard.resubmitted} of {retries}) after: {why}",
            ),
            force=True,
        )
        if log is not None:
            log.warning(
                "%s crashed (%s); resubmitted (%d of %d): it pays only for what the ledger lacks",
                spec.label,
                why,
                shard.resubmitted,
                retries,
            )
        return None
    if log is not None:
        log.info("%s: %s", spec.label, state.type.value)
    result = _shard_result(client, run_id) if state.is_completed() else None
    return _Final(spec, run_id, shard.name, state.type.value, state.message or "", result)


def _last_heartbeat(client: Any, run_id: UUID) -> datetime | None:
    """When the flow run last sent its heartbeat event (None: never, as far as we know).

    A flow run sends its first heartbeat as it starts, so a shard with none has either
    just started or runs with heartbeats off; neither is judged lost.
    """
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    page = client.read_events(
        filter=EventFilter(
            event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{run_id}"]),
        ),
        limit=1,
    )
    times: list[datetime] = [event.occurred for event in page.events]
    return max(times) if times else None


def _shard_result(client: Any, run_id: UUID) -> dict[str, Any] | None:
    """The `ShardResult` the shard's last attempt recorded in its artifact (None if none).

    A resubmitted shard has one artifact per attempt that got that far (an attempt killed
    after recording but before its state reached the server): the newest is the one that
    finished.
    """
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )
    from prefect.client.schemas.sorting import ArtifactSort

    artifacts = client.read_artifacts(
        artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]),
            key=ArtifactFilterKey(any_=[KEY_SHARD]),
        ),
        sort=ArtifactSort.CREATED_DESC,
    )
    for artifact in artifacts:
        data = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
        if isinstance(data, list) and data:
            return dict(data[0])
    return None

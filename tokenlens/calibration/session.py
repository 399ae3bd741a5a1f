"""Opening a calibration run: clients, ledger, store, and the spend estimate.

(The offline default scope, what a local-model run measures when the user did not say,
is `tokenlens.config.offline_scope`.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenlens.calibration.context import Calibration, Calls, answer_model, calibration_key
from tokenlens.calibration.estimate import CallPlan, plan_calls
from tokenlens.calibration.judging import build_judges
from tokenlens.calibration.runner import NoProgress, Progress
from tokenlens.calibration.runs import RunManifest, find_run, reopen_run, start_run
from tokenlens.calibration.stage_load import select_tasks
from tokenlens.calibration.store import Store
from tokenlens.config import CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.ledger import Ledger, LedgerClient, LedgerView, SpendMeter
from tokenlens.models.base import ModelClient
from tokenlens.tables import CompressionRow
from tokenlens.tasks import CalibrationTask


def resume_config(store: str | Path, ref: str | None) -> tuple[CalibrationConfig, RunManifest]:
    """The settings of the run to resume (`ref`: run id, calibration id, or None for the
    newest unfinished run)."""
    manifest = find_run(store, ref)
    return manifest.calibration_config(), manifest


def open_calibration(
    config: CalibrationConfig,
    *,
    progress: Progress | None = None,
    client_params: dict[str, Any] | None = None,
    fresh_sample: bool = False,
    resume: str | None = None,
    flow_run_id: str | None = None,
) -> tuple[Calibration, list[CalibrationTask]]:
    """Build everything a run needs and record the run; makes no model call.

    `resume` reopens that run (`"latest"`: the newest unfinished one) with its own seed
    and settings; otherwise a new run starts (see `tokenlens.calibration.runs`).
    """
    from tokenlens.models.registry import make_client

    manifest: RunManifest | None = None
    if resume is not None:
        config, manifest = resume_config(config.store, None if resume == "latest" else resume)
    backend = config.resolved_backend()
    client = make_client(backend, config.model, **(client_params or {}))
    model = answer_model(config, client)
    tasks = select_tasks(config)
    config = config.with_tool_rungs(tasks)  # a resumed run's are resolved already
    calibration_id = calibration_key(config, tasks, model)
    if manifest is not None:
        if manifest.calibration_id != calibration_id:
            raise TokenLensError(
                f"run {manifest.run_id} cannot be resumed: its tasks or settings changed since "
                f"(calibration {manifest.calibration_id}, now {calibration_id}); start a new run"
            )
        manifest = reopen_run(config.store, manifest, flow_run_id)
    else:
        manifest = start_run(
            config, calibration_id, fresh_sample=fresh_sample, flow_run_id=flow_run_id
        )
    config = manifest.calibration_config()  # the run's own sample seed
    cal = assemble(
        config,
        client,
        run_id=manifest.run_id,
        calibration_id=calibration_id,
        progress=progress,
        run=manifest,
    )
    # What the run's earlier attempts paid counts against its cap (SpendMeter).
    cal.calls.spend.carried = sum(
        r.completion.cost_usd or 0.0 for r in cal.calls.ledger.paid_by(cal.store.run_id)
    )
    return cal, tasks


def assemble(
    config: CalibrationConfig,
    client: ModelClient,
    *,
    run_id: str,
    calibration_id: str,
    progress: Progress | None = None,
    run: RunManifest | None = None,
    spend: SpendMeter | None = None,
    compacts: bool = True,
) -> Calibration:
    """The `Calibration` of a run (or of a shard of it): store, ledger, ledger-backed clients.

    `client` is the raw backend; every answer and LLM judge call goes through the ledger
    `<store>/ledger`, opened here and stamping `run_id` on every call it stores (a shard
    stamps its parent's). `compacts=False`: leave compaction to another process (a shard).
    Makes no model call.
    """
    model = answer_model(config, client)
    store = Store(config.store, run_id)
    ledger = Ledger(store.ledger_dir, run=run_id, compacts=compacts)
    spend = spend or SpendMeter(config.max_spend)
    answer_client = LedgerClient(client, ledger, kind="answer", spend=spend)
    judges = build_judges(config, answer_client=client, model=model, ledger=ledger, spend=spend)
    return Calibration(
        config=config,
        store=store,
        model=model,
        calls=Calls(ledger=ledger, spend=spend, answer_client=answer_client, judges=judges),
        backend=config.resolved_backend(),
        progress=progress or NoProgress(),
        calibration_id=calibration_id,
        run=run,
    )


def estimate_spend(
    cal: Calibration,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    known: LedgerView | None = None,
) -> CallPlan:
    """The run's calls, what the ledger holds (or held: `known`, a snapshot taken before
    paying, so the estimate can be made while the calls are paid), and a price bound."""
    return plan_calls(
        cal.config,
        model=cal.model,
        backend=cal.backend,
        tasks=tasks,
        compressions=compressions,
        ledger=known if known is not None else cal.calls.ledger,
    )

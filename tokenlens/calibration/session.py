"""Opening a calibration run: clients, ledger, store, and the spend estimate.

Also the offline default: on the embedded local model (2 CPU cores, seconds per answer)
a full run over the starter set would take hours, so `offline_defaults` narrows the run
to something that finishes in minutes, but only for the settings the user did not choose,
and says what it chose and how to widen it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.calibration.runner import NoProgress, Progress
from tokenlens.calibration.runs import RunManifest, find_run, reopen_run, start_run
from tokenlens.calibration.stages import (
    Calibration,
    answer_model,
    build_judges,
    calibration_key,
    plan_answers,
    request_tokens,
    select_tasks,
)
from tokenlens.calibration.store import Store
from tokenlens.config import DEFAULT_RATES, CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter
from tokenlens.pricing import cost_usd
from tokenlens.tasks import CalibrationTask

#: What an offline run measures when the user did not say (see module docstring).
OFFLINE_MAX_TASKS_PER_CLASS = 2
OFFLINE_REPEATS = 2
OFFLINE_RATES: tuple[float, ...] = (0.6,)
OFFLINE_MAX_TOKENS = 192


def offline_defaults(config: CalibrationConfig) -> tuple[CalibrationConfig, list[str]]:
    """Narrow an offline (local-model) run to minutes; returns the config and what changed.

    A setting counts as chosen when it was passed explicitly or differs from the default.
    Online runs are returned unchanged.
    """
    if config.resolved_backend() != "local":
        return config, []
    chosen = config.model_fields_set
    updates: dict[str, Any] = {}
    notes: list[str] = []
    if config.max_tasks_per_class is None:
        updates["max_tasks_per_class"] = OFFLINE_MAX_TASKS_PER_CLASS
        updates["shortest_tasks_first"] = True
        notes.append(
            f"the {OFFLINE_MAX_TASKS_PER_CLASS} shortest tasks per class "
            "(widen: --max-tasks-per-class N)"
        )
    if "repeats" not in chosen:
        updates["repeats"] = OFFLINE_REPEATS
        notes.append(f"{OFFLINE_REPEATS} repeats (widen: --repeats 3)")
    if tuple(config.rates) == tuple(sorted(DEFAULT_RATES, reverse=True)):
        updates["rates"] = OFFLINE_RATES
        notes.append(
            "rate " + ",".join(f"{r:g}" for r in OFFLINE_RATES) + " (widen: --rates 0.8,0.6,0.4)"
        )
    if "max_tokens" not in chosen:
        updates["max_tokens"] = OFFLINE_MAX_TOKENS
        notes.append(f"answers up to {OFFLINE_MAX_TOKENS} tokens (change: --max-tokens N)")
    if not updates:
        return config, []
    return config.model_copy(update=updates), notes


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
    calibration_id = calibration_key(config, tasks, model)
    if manifest is not None:
        if manifest.calibration_id != calibration_id:
            raise TokenLensError(
                f"run {manifest.run_id} cannot be resumed: its tasks or settings changed since "
                f"(calibration {manifest.calibration_id}, now {calibration_id}); start a new run"
            )
        manifest = reopen_run(config.store, manifest)
    else:
        manifest = start_run(
            config, calibration_id, fresh_sample=fresh_sample, flow_run_id=flow_run_id
        )
    config = manifest.calibration_config()  # the run's own sample seed
    store = Store(Path(config.store), manifest.run_id)
    ledger = Ledger(store.ledger_dir)
    spend = SpendMeter(config.max_spend)
    answer_client = LedgerClient(client, ledger, kind="answer", spend=spend)
    judges = build_judges(config, answer_client=client, model=model, ledger=ledger, spend=spend)
    cal = Calibration(
        config=config,
        store=store,
        ledger=ledger,
        spend=spend,
        answer_client=answer_client,
        judge_clients=judges,
        model=model,
        backend=backend,
        progress=progress or NoProgress(),
        calibration_id=calibration_id,
        run=manifest,
    )
    return cal, tasks


@dataclass(frozen=True)
class SpendEstimate:
    """Before any call: how many calls are new, and an upper bound of what they cost."""

    answer_calls: int
    cached_answer_calls: int
    judge_calls: int
    usd_upper: float | None  # None when the model has no price (local, unknown model)

    def describe(self) -> str:
        money = (
            "no per-token price (local model or unpriced)"
            if self.usd_upper is None
            else f"at most ${self.usd_upper:.4f} (every answer at max_tokens)"
        )
        return (
            f"{self.answer_calls} new answer calls ({self.cached_answer_calls} already in the "
            f"ledger), up to {self.judge_calls} judge calls; {money}"
        )


#: Judge prompt overhead (system + instructions), and a generous judge reply, in tokens.
_JUDGE_OVERHEAD_TOKENS = 450
_JUDGE_REPLY_TOKENS = 350


def estimate_spend(
    cal: Calibration, tasks: list[CalibrationTask], compressions: list[dict[str, Any]]
) -> SpendEstimate:
    """Count missing calls and bound their price from token estimates."""
    plan = plan_answers(cal, tasks, compressions)
    client = cal.answer_client
    unique = {client.key(r): r for r in plan.requests.values()}
    missing = [r for k, r in unique.items() if k not in cal.ledger]
    config = cal.config
    batch = config.batch and cal.backend == "anthropic"
    total: float | None = 0.0
    for request in missing:
        body = request.model_dump(mode="json", exclude_none=True)
        cost = cost_usd(
            request.model,
            input_tokens=request_tokens(body),
            output_tokens=request.max_tokens,
            batch=batch,
        )
        total = None if cost is None or total is None else total + cost
    judge_calls = 0
    if any(name != "metric" for name in cal.judge_clients):
        pairs = len(tasks) * config.repeats * (1 + len(cal.arms))
        per_pair = 2 if config.judge_both_orders else 1
        judge_calls = pairs * per_pair
        if config.judge_twice:
            judge_calls += len(tasks) * config.repeats * per_pair
        judge_model = config.judge_model or cal.model
        per_task_in = [
            request_tokens(t.to_request(model=cal.model)) + _JUDGE_OVERHEAD_TOKENS for t in tasks
        ]
        mean_in = sum(per_task_in) / max(1, len(per_task_in)) + 2 * config.max_tokens
        cost = cost_usd(
            judge_model,
            input_tokens=int(mean_in * judge_calls),
            output_tokens=_JUDGE_REPLY_TOKENS * judge_calls,
        )
        total = None if cost is None or total is None else total + cost
    return SpendEstimate(len(missing), len(unique) - len(missing), judge_calls, total)

"""What every stage of one calibration run shares, and the run's identity.

`Calibration` carries the settings, the store, the answer model and the run's ids; the
paid stage reaches the ledger, spend meter and clients through `Calibration.calls`
(`Calls`), which the other stages never touch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokenlens.calibration.runner import NoProgress, Progress
from tokenlens.calibration.store import Store
from tokenlens.compress.arms import Arm, build_ladder
from tokenlens.compress.external import PREFIX, TOOL_PREFIX
from tokenlens.config import DEFAULT_ANTHROPIC_MODEL, CalibrationConfig
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter
from tokenlens.models.base import ModelClient
from tokenlens.tasks import CalibrationTask

if TYPE_CHECKING:
    from tokenlens.calibration.runs import RunManifest
    from tokenlens.judge import Judge


@dataclass
class Calls:
    """How a run pays for model calls: through the ledger, against the spend meter."""

    ledger: Ledger
    spend: SpendMeter
    answer_client: LedgerClient
    judges: dict[str, Judge]  # judge name -> MetricJudge / LedgerJudge

    def close(self) -> None:
        """Close the backend's connections (the SDK's pool), through any wrappers: left
        to the garbage collector, each open socket is closed with a ResourceWarning at
        whatever moment it runs, in another stage or another test."""
        client: Any = self.answer_client.inner
        while client is not None:
            close = getattr(client, "close", None)
            if callable(close):
                close()
            client = getattr(client, "inner", None)


@dataclass
class Calibration:
    """What the stages of one run share: settings, store, answer model, ids, and its calls."""

    config: CalibrationConfig
    store: Store
    model: str
    backend: str
    calls: Calls
    progress: Progress = field(default_factory=NoProgress)
    #: What was measured (`calibration_key`); `store.run_id` names this run of it.
    calibration_id: str = ""
    run: RunManifest | None = None

    @property
    def arms(self) -> list[Arm]:
        return run_ladder(self.config)


def run_ladder(config: CalibrationConfig) -> list[Arm]:
    """Every arm of a run, gentlest first: the text ladder (`methods` x `rates`), then the
    tool-output rungs as the plug-in arms ``ext:tools-<rung>`` (once
    `CalibrationConfig.with_tool_rungs` resolved them; unresolved, none)."""
    tools = [f"{PREFIX}{TOOL_PREFIX}{rung}" for rung in config.tool_rungs or ()]
    return build_ladder([*config.methods, *tools], config.rates)


def answer_model(config: CalibrationConfig, client: ModelClient) -> str:
    """The model id answers are requested from (the client's, else the config's)."""
    return str(getattr(client, "model", None) or config.model or DEFAULT_ANTHROPIC_MODEL)


def judge_name_for(config: CalibrationConfig, model: str) -> str:
    """The judge that decides: the LLM judge when there is one, else the metric."""
    if config.judge == "metric":
        return "metric"
    return config.judge_model or model


def judge_names(config: CalibrationConfig, model: str) -> list[str]:
    """Every judge a run grades with, in grading order (the metric first)."""
    names = ["metric"] if config.judge in ("metric", "both") else []
    if config.judge in ("llm", "both"):
        names.append(config.judge_model or model)
    return names


def calibration_key(config: CalibrationConfig, tasks: list[CalibrationTask], model: str) -> str:
    """The calibration id: what was measured, with which model, how.

    The sample seed is left out on purpose: runs of one calibration may draw different
    samples (see `tokenlens.calibration.runs`)."""
    from tokenlens.identity import calibration_id

    arms = run_ladder(config)
    return calibration_id(
        tasks=tasks,
        arms=arms,
        models={"answer": model, "judge": judge_name_for(config, model)},
        settings={
            "backend": config.resolved_backend(),
            "repeats": config.repeats,
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "judge": config.judge,
            "judge_both_orders": config.judge_both_orders,
            "judge_twice": config.judge_twice,
            "tolerance": config.tolerance,
            "mode": config.mode,
            "llmlingua_model": config.llmlingua_model,
            **_answer_style(config),
        },
    )


def _answer_style(config: CalibrationConfig) -> dict[str, Any]:
    """What the backend adds to every answer request (only the local backend adds any)."""
    if config.resolved_backend() != "local":
        return {}
    from tokenlens.models.chat import BRIEF_ANSWER_INSTRUCTION

    return {"answer_instruction": BRIEF_ANSWER_INSTRUCTION}

"""The answers a run asks for: one request per answer cell, and the rows they become."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tokenlens.calibration.cells import CLEAR, AnswerCell, answer_cells, sample_seed
from tokenlens.calibration.stage_compress import measured_arms
from tokenlens.compress.arms import CONTROL
from tokenlens.config import CalibrationConfig
from tokenlens.errors import JudgeError, ModelCallError
from tokenlens.models.base import Completion, CompletionRequest
from tokenlens.tables import AnswerRow, CompressionRow
from tokenlens.tasks import CalibrationTask


@dataclass(frozen=True)
class AnswerPlan:
    """The request of every answer cell, and the cells that could not be asked."""

    requests: dict[AnswerCell, CompletionRequest]
    blocked: dict[AnswerCell, str]  # cell -> why no request (arm failed to compress)

    def only(self, cells: set[AnswerCell]) -> AnswerPlan:
        """The plan of those cells alone (a sequential round)."""
        return AnswerPlan(
            {c: r for c, r in self.requests.items() if c in cells},
            {c: why for c, why in self.blocked.items() if c in cells},
        )


def answer_requests(
    config: CalibrationConfig,
    model: str,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow] | None,
) -> AnswerPlan:
    """The request of every answer cell of a run with `config` (its seed is the sample's);
    with `compressions` None, of the cells that need no compressed body (cleartext and
    control), which can be asked while the arms are compressed.

    On the local backend every request, the cleartext's and each arm's alike, ends with
    the brief-answer instruction (`tokenlens.models.chat.brief_answer`)."""
    from tokenlens.models.chat import brief_answer

    brief = config.resolved_backend() == "local"
    by_cell = {(r["task_id"], r["arm"]): r for r in compressions or []}
    arm_keys = measured_arms(config, compressions)
    requests: dict[AnswerCell, CompletionRequest] = {}
    blocked: dict[AnswerCell, str] = {}
    bodies = {t.id: t.to_request(model=model, max_tokens=config.max_tokens) for t in tasks}
    for cell in answer_cells([t.id for t in tasks], [CONTROL, *arm_keys], config.repeats):
        body = bodies[cell.task_id]
        if cell.arm not in (CLEAR, CONTROL):
            row = by_cell[(cell.task_id, cell.arm)]
            body_json = row["body_json"]
            if row["status"] != "ok" or body_json is None:
                blocked[cell] = f"compression {row['status']}: {row['reason']}"
                continue
            body = json.loads(body_json)
        if brief:
            body = brief_answer(body)
        requests[cell] = CompletionRequest.from_body(
            body,
            model=model,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            seed=sample_seed(config.seed, cell.replicate, cell.sample),
        )
    return AnswerPlan(requests, blocked)


def answer_row(
    cell: AnswerCell, task_class: str, *, seed: int, call_key: str, error: str | None = None
) -> AnswerRow:
    """An answer row with no answer yet (`fill_completion` adds one)."""
    return {
        "task_id": cell.task_id,
        "task_class": task_class,
        "arm": cell.arm,
        "replicate": cell.replicate,
        "sample": cell.sample,
        "seed": seed,
        "call_key": call_key,
        "text": None,
        "stop_reason": None,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
        "latency_s": None,
        "error": error,
    }


def fill_completion(row: AnswerRow, completion: Completion) -> None:
    row.update(
        {
            "text": completion.text,
            "stop_reason": completion.stop_reason,
            "input_tokens": completion.usage.input_tokens,
            "output_tokens": completion.usage.output_tokens,
            "cost_usd": completion.cost_usd,
            "latency_s": completion.latency_s,
        }
    )


def outcome_row(
    cell: AnswerCell,
    task_class: str,
    request: CompletionRequest,
    key: str,
    result: Completion | BaseException | None,
) -> AnswerRow:
    """The row of an asked cell: its completion, its error, or never run (spend cap)."""
    row = answer_row(cell, task_class, seed=request.seed, call_key=key)
    if isinstance(result, Completion):
        fill_completion(row, result)
    elif isinstance(result, BaseException):
        row["error"] = describe(result)
        paid = getattr(result, "completion", None)
        if paid is not None:
            fill_completion(row, paid)
    else:
        row["error"] = "not run: max spend reached"
    return row


def describe(exc: BaseException) -> str:
    kind = type(exc).__name__
    return f"{kind}: {exc}" if isinstance(exc, ModelCallError | JudgeError) else repr(exc)

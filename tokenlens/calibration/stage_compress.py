"""Stage 2, compress: every task's body through every arm of the ladder.

A compressed body is reused by its content key (`compress_key`) from the run's earlier
attempts; an arm that cannot run here is recorded as `unavailable` for every task. Every
compressed body is checked against its original (`tokenlens.fidelity.check_body`: tool
outputs only, so a body without tool_result blocks checks to zeros at no cost).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypedDict, cast

from tokenlens import tables
from tokenlens.calibration.context import Calibration, run_ladder
from tokenlens.compress.arms import Arm
from tokenlens.config import CalibrationConfig
from tokenlens.errors import ArmUnavailable, CompressionError
from tokenlens.tables import CompressionRow, CompressionStatus
from tokenlens.tasks import CalibrationTask

#: Bump when the compressed-body cache key recipe changes.
COMPRESS_CACHE_VERSION = 1


def compress_key(body: dict[str, Any], arm: Arm, settings: Any) -> str:
    """What determines a compressed body: the input body, the arm and the settings."""
    material = {
        "v": COMPRESS_CACHE_VERSION,
        "body": body,
        "arm": arm.key,
        "settings": settings.model_dump(mode="json"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


class _CompressionCell(TypedDict):
    """The columns of a `CompressionRow` known before the arm runs."""

    task_id: str
    task_class: str
    arm: str
    method: str
    rate: float | None
    cache_key: str


def compress_stage(
    cal: Calibration, tasks: list[CalibrationTask], *, write: bool = True
) -> list[CompressionRow]:
    """Compress every task's body with every arm; reuse bodies already computed.

    `write=False` leaves the compressions table alone (a shard compresses its own tasks
    and records nothing but its paid calls).

    An arm that cannot run here (e.g. LLMLingua-2 without its weights) is recorded as
    `unavailable` with the reason for every task; it is never replaced by another rung.
    """
    from tokenlens.compress import CompressSettings, compress_request
    from tokenlens.fidelity import check_body

    settings = CompressSettings(llmlingua_model=cal.config.llmlingua_model)
    stored = cast(list[CompressionRow], cal.store.read("compressions"))
    previous = {row["cache_key"]: row for row in stored}
    unavailable: dict[str, str] = {}
    rows: list[CompressionRow] = []
    arms = cal.arms
    total = len(tasks) * len(arms)
    cal.progress.start("compress", total)
    done = 0
    for task in tasks:
        body = task.to_request(model=cal.model, max_tokens=cal.config.max_tokens)
        for arm in arms:
            key = compress_key(body, arm, settings)
            base: _CompressionCell = {
                "task_id": task.id,
                "task_class": task.task_class,
                "arm": arm.key,
                "method": arm.method,
                "rate": arm.rate,
                "cache_key": key,
            }
            cached = previous.get(key)
            if cached is not None and cached["status"] == "ok":
                rows.append({**cached, **base})
            elif arm.key in unavailable:
                rows.append(_failed_compression(base, "unavailable", unavailable[arm.key]))
            else:
                try:
                    result = compress_request(body, arm, settings=settings)
                except ArmUnavailable as exc:
                    unavailable[arm.key] = str(exc)
                    rows.append(_failed_compression(base, "unavailable", str(exc)))
                except CompressionError as exc:
                    rows.append(_failed_compression(base, "error", str(exc)))
                else:
                    fidelity = check_body(body, result.body, task.facts)
                    rows.append(
                        {
                            **base,
                            "status": "ok",
                            "reason": None,
                            "body_json": json.dumps(result.body, sort_keys=True),
                            "original_tokens": result.original_tokens,
                            "compressed_tokens": result.compressed_tokens,
                            "reduction": result.reduction,
                            "eligible_blocks": result.eligible_blocks,
                            "total_blocks": result.total_blocks,
                            "elapsed_ms": result.elapsed_ms,
                            "fabricated_lines": fidelity.fabricated_lines,
                            "unmarked_drops": fidelity.unmarked_drops,
                            "facts_lost": fidelity.facts_lost,
                        }
                    )
            done += 1
            cal.progress.advance("compress", done, total)
    cal.progress.finish("compress")
    if write:
        cal.store.write("compressions", rows, tables.COMPRESSIONS)
    return rows


def _failed_compression(
    base: _CompressionCell, status: CompressionStatus, reason: str
) -> CompressionRow:
    return {
        **base,
        "status": status,
        "reason": reason,
        "body_json": None,
        "original_tokens": None,
        "compressed_tokens": None,
        "reduction": None,
        "eligible_blocks": None,
        "total_blocks": None,
        "elapsed_ms": None,
        "fabricated_lines": None,
        "unmarked_drops": None,
        "facts_lost": None,
    }


def unavailable_arms(compressions: list[CompressionRow]) -> dict[str, str]:
    """Arms that could not run at all here, with the reason (for the report)."""
    return {r["arm"]: r["reason"] or "" for r in compressions if r["status"] == "unavailable"}


def measured_arms(
    config: CalibrationConfig, compressions: list[CompressionRow] | None
) -> list[str]:
    """The ladder's arm keys that could run here (an unavailable arm is not asked); none
    while the compressions are not in yet (None)."""
    if compressions is None:
        return []
    ladder = run_ladder(config)
    return [arm.key for arm in ladder if not _never_ran(compressions, arm.key)]


def _never_ran(compressions: list[CompressionRow], arm: str) -> bool:
    rows = [r for r in compressions if r["arm"] == arm]
    return bool(rows) and all(r["status"] == "unavailable" for r in rows)

"""Stage 1, load: the run's tasks recorded as the tasks table."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tokenlens import tables
from tokenlens.calibration.store import Store
from tokenlens.config import CalibrationConfig
from tokenlens.tables import TaskRow
from tokenlens.tasks import CalibrationTask
from tokenlens.tokens import estimate_tokens


def task_hash(task: CalibrationTask) -> str:
    dumped = task.model_dump_json(exclude=task.unset_added_fields())
    return hashlib.sha256(dumped.encode("utf-8")).hexdigest()


def select_tasks(config: CalibrationConfig) -> list[CalibrationTask]:
    """The run's tasks (see `CalibrationConfig.selected_tasks`)."""
    return config.selected_tasks()


def load_stage(
    config: CalibrationConfig, store: Store, tasks: list[CalibrationTask], model: str
) -> list[TaskRow]:
    """Write the TASKS table (id, class, content hash, cleartext body, tokens)."""
    rows: list[TaskRow] = []
    for task in tasks:
        body = task.to_request(model=model, max_tokens=config.max_tokens)
        rows.append(
            {
                "task_id": task.id,
                "task_class": task.task_class,
                "content_hash": task_hash(task),
                "request_json": json.dumps(body, sort_keys=True),
                "tokens": request_tokens(body),
            }
        )
    store.write("tasks", rows, tables.TASKS)
    return rows


def request_tokens(body: dict[str, Any]) -> int:
    """Estimated prompt tokens of a Messages body (system + every text block)."""
    from tokenlens.judge import render_request_text

    return estimate_tokens(render_request_text(body))

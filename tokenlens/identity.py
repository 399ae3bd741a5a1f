"""The calibration id: a stable name for *what* was calibrated.

It keys the call ledger and names the policy, so two runs over the same tasks, arms,
models and settings share every paid call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from tokenlens.compress.arms import Arm


def calibration_id(
    *,
    tasks: Iterable[Any],
    arms: Iterable[Arm | str],
    models: Mapping[str, str | None],
    settings: Mapping[str, Any],
) -> str:
    """A stable 16-hex id of what was calibrated: tasks + arms + models + settings.

    Tasks are hashed by content (pydantic models via `model_dump`), sorted by id, so the
    same set in another order gives the same id; any edit to a task changes it.
    """

    def task_dict(task: Any) -> dict[str, Any]:
        if hasattr(task, "model_dump"):
            unset = task.unset_added_fields() if hasattr(task, "unset_added_fields") else None
            return dict(task.model_dump(mode="json", exclude=unset))
        return dict(task)

    task_list = sorted((task_dict(t) for t in tasks), key=lambda t: str(t.get("id", "")))
    arm_keys = sorted(a.key if isinstance(a, Arm) else Arm.parse(a).key for a in arms)
    payload = {
        "tasks": task_list,
        "arms": arm_keys,
        "models": dict(sorted(models.items())),
        "settings": dict(sorted(settings.items())),
    }
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

"""Fixtures for the judge / statistics / decision tests: a fake model client and grade
tables built cell by cell, so each rule can be exercised with numbers chosen by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pytest

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.models.base import Completion, CompletionRequest


class FakeJudgeClient:
    """A ModelClient that replays scripted judge replies and records every request."""

    name = "fake"

    def __init__(self, replies: Sequence[dict[str, Any] | str]) -> None:
        self.replies = list(replies)
        self.requests: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> Completion:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, str):
            return Completion(text=reply, parsed=None, model=request.model)
        return Completion(text=json.dumps(reply), parsed=reply, model=request.model)

    def user_text(self, index: int = 0) -> str:
        content = self.requests[index].messages[-1].content
        assert isinstance(content, str)
        return content


@pytest.fixture
def fake_client_factory() -> type[FakeJudgeClient]:
    return FakeJudgeClient


GradePairs = Sequence[Sequence[tuple[float | None, float | None]]]


def cell(
    task_class: str,
    arm: str,
    per_task: GradePairs,
    *,
    reduction: float = 0.2,
    judge: str = "metric",
    task_prefix: str | None = None,
    judge_pass: int = 0,
) -> list[dict[str, Any]]:
    """Rows of one class x arm: per_task[i][r] = (grade_clear, grade_comp) of task i, rep r."""
    parsed = None if arm == CONTROL else Arm.parse(arm)
    rows = []
    for i, reps in enumerate(per_task):
        for r, (clear, comp) in enumerate(reps):
            rows.append(
                {
                    "task_id": f"{task_prefix or task_class}-{i}",
                    "task_class": task_class,
                    "arm": arm,
                    "method": CONTROL if parsed is None else parsed.method,
                    "rate": None if parsed is None else parsed.rate,
                    "replicate": r,
                    "judge": judge,
                    "grade_clear": clear,
                    "grade_comp": comp,
                    "reduction": 0.0 if parsed is None else reduction,
                    "tokens_clear": 1000,
                    "tokens_comp": int(1000 * (1 - (0.0 if parsed is None else reduction))),
                    "note": None,
                    "error": None if clear is not None and comp is not None else "judge failed",
                    "judge_pass": judge_pass,
                }
            )
    return rows


def uniform(clear: float, comp: float, *, tasks: int = 5, reps: int = 3) -> GradePairs:
    return [[(clear, comp)] * reps for _ in range(tasks)]


def jittered(
    clear: float, ratio: float, *, tasks: int = 5, reps: int = 3, spread: float = 1.0
) -> GradePairs:
    """Deterministic small variation around comp = ratio * clear (so intervals exist)."""
    out = []
    for t in range(tasks):
        reps_list = []
        for r in range(reps):
            c = clear + (t % 3) - 1
            wobble = spread * (((t * 7 + r * 3) % 5) - 2) / 2
            reps_list.append((c, round(ratio * c + wobble, 3)))
        out.append(reps_list)
    return out


def frame(*cells: list[dict[str, Any]]) -> pd.DataFrame:
    rows = [row for c in cells for row in c]
    return pd.DataFrame(rows)

"""Grade tables built cell by cell, so each decision rule can be exercised with numbers
chosen by hand (shared by the decision, report and simulation tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.simulate import Scenario, SimArm, simulate_grades

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


def realistic(seed: int = 11) -> pd.DataFrame:
    """Seven classes like the starter set; summarization's control loses ~15 %."""
    ladder = (SimArm("llmlingua2@0.8", 1.0, 0.15), SimArm("llmlingua2@0.6", 0.9, 0.33))
    clean = {"judge_sd": 1.0, "sampling_sd": 1.0, "task_sd": 0.005, "n_tasks": 60}
    worlds = {
        "extraction": Scenario("extraction", ladder, **clean),
        "code-context": Scenario("code-context", ladder, **clean),
        "numeric-reasoning": Scenario(
            "numeric-reasoning", ladder, control_retention=0.95, n_tasks=20
        ),
        "instruction-following": Scenario("instruction-following", ladder, n_tasks=20),
        "long-doc-qa": Scenario("long-doc-qa", ladder, judge_sd=5.0, n_tasks=20),
        "summarization": Scenario("summarization", ladder, control_retention=0.85, n_tasks=20),
        "chat-history": Scenario("chat-history", (SimArm("llmlingua2@0.8", 0.8, 0.14),), **clean),
    }
    rng = np.random.default_rng(seed)
    tables = [simulate_grades(s, rng, task_class=name) for name, s in worlds.items()]
    return pd.concat(tables, ignore_index=True)

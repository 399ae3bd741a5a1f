"""Why one design certified (✓) a class on a draw and the other did not.

The paired study (`tokenlens.simulate_study`) counts the runs where only one design
published ✓; this says, for such a run, what the other design did: how far each arm and
the control were sampled (tasks x repeats), and which check kept it from ✓ — an arm on
the way that stopped on its futility bound, or failed its bound at its last look, or the
published arm's evidence (tasks) or the control's noise floor. Read by
`bench/bench_simulation.py --paired N --why`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tokenlens.compress.arms import CONTROL

#: The causes `explain` names (the first word of its line), in the order they are tallied.
CAUSES = ("futility", "bound", "floor", "evidence", "unmeasurable", "other")


def reach(grades: pd.DataFrame, arm: str) -> tuple[int, int]:
    """(tasks, repeats) an arm was sampled to in a grades table (0, 0 when never)."""
    mine = grades[grades["arm"] == arm]
    if mine.empty:
        return 0, 0
    return int(mine["task_id"].nunique()), int(mine["replicate"].max()) + 1


def explain(
    rows: pd.DataFrame,
    grades: pd.DataFrame,
    ladder: Sequence[str],
    target: str | None,
    *,
    tolerance: float,
    full: tuple[int, int],
) -> str:
    """Why the design behind `rows` (its curve's rows for one class) and `grades` (what it
    paid for) did not certify up to `target`, the arm the other design certified.

    `full` is the draw's (tasks, repeats): an arm that failed short of it stopped on its
    futility bound; one that failed there failed its bound at its last look."""
    table = rows.set_index("arm")
    ctrl = reach(grades, CONTROL)
    where = f"(control {ctrl[0]}x{ctrl[1]})"
    if (table["status"] == "unmeasurable").any():
        return f"unmeasurable: the control read unmeasurable {where}"
    chosen = rows.loc[rows["chosen"].astype(bool), "arm"]
    reached = ladder.index(str(chosen.iloc[0])) if len(chosen) else -1
    goal = ladder.index(target) if target in ladder else len(ladder) - 1
    if reached >= goal and reached >= 0:
        row = table.loc[ladder[reached]]
        n = reach(grades, ladder[reached])
        floor = float(row["noise_floor"])
        if int(row["n_tasks"]) < int(row["tasks_needed_measured"]):
            return (
                f"evidence: {ladder[reached]} held on {int(row['n_tasks'])} tasks, a ✓ needs "
                f"{int(row['tasks_needed_measured'])} {where}"
            )
        return (
            f"floor: {ladder[reached]} held at {n[0]}x{n[1]}, noise floor "
            f"{100 * floor:.1f} % > {100 * (1 - tolerance):.0f} % {where}"
        )
    for arm in ladder[: goal + 1]:
        if arm not in table.index:
            return f"other: {arm} never sampled {where}"
        row = table.loc[arm]
        if row["status"] in ("held", "ignored") and bool(row["passes"]):
            continue
        n = reach(grades, arm)
        low = float(row["retention_low"])
        level = f"{100 * float(row['bound_level']):.1f} %"
        if n != full and row["status"] in ("failed", "too_few_tasks"):
            return (
                f"futility: {arm} stopped at {n[0]}x{n[1]} (retention "
                f"{float(row['retention']):.3f}) {where}"
            )
        return f"bound: {arm} at {n[0]}x{n[1]}, lower {level} bound {low:.4f} < {tolerance} {where}"
    return f"other: {where}"


def tally(lines: Sequence[str]) -> dict[str, int]:
    """How many `explain` lines name each cause."""
    counts = dict.fromkeys(CAUSES, 0)
    for line in lines:
        cause = line.split(":", 1)[0].split()[-1]
        counts[cause if cause in counts else "other"] += 1
    return counts

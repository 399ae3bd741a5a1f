"""Why one design certified a draw and the other did not: the paired study's dump."""

from __future__ import annotations

import pandas as pd

from tokenlens.simulate_why import explain, tally

LADDER = ("prune@0.9", "prune@0.8")


def _rows(**arms: tuple[str, bool, int]) -> pd.DataFrame:
    """Curve rows: arm -> (status, passes, tasks); chosen is the last held arm."""
    held = [a for a, (status, passes, _) in arms.items() if status == "held" and passes]
    rows = [
        {
            "arm": arm,
            "status": status,
            "passes": passes,
            "chosen": bool(held) and arm == held[-1],
            "n_tasks": n,
            "tasks_needed_measured": 60,
            "noise_floor": 0.055,
            "retention": 0.9,
            "retention_low": 0.94,
            "bound_level": 0.97,
        }
        for arm, (status, passes, n) in arms.items()
    ]
    return pd.DataFrame(rows)


def _grades(**reach: tuple[int, int]) -> pd.DataFrame:
    cells = [
        {"arm": arm, "task_id": f"t{t}", "replicate": r}
        for arm, (n, reps) in reach.items()
        for t in range(n)
        for r in range(reps)
    ]
    return pd.DataFrame(cells)


def test_a_gentle_arm_stopped_short_of_the_draw_is_a_futility_stop() -> None:
    rows = _rows(**{"prune@0.9": ("failed", False, 20), "prune@0.8": ("not_reached", False, 20)})
    grades = _grades(**{"control": (20, 1), "prune@0.9": (20, 1), "prune@0.8": (20, 1)})
    why = explain(rows, grades, LADDER, "prune@0.8", tolerance=0.95, full=(60, 3))
    assert why.startswith("futility: prune@0.9 stopped at 20x1")
    assert "(control 20x1)" in why


def test_an_arm_failed_at_the_full_draw_failed_its_bound() -> None:
    rows = _rows(**{"prune@0.9": ("failed", False, 60), "prune@0.8": ("ignored", True, 60)})
    grades = _grades(**{"control": (60, 3), "prune@0.9": (60, 3), "prune@0.8": (60, 3)})
    why = explain(rows, grades, LADDER, "prune@0.8", tolerance=0.95, full=(60, 3))
    assert why.startswith("bound: prune@0.9 at 60x3, lower 97.0 % bound 0.9400 < 0.95")


def test_the_published_arm_reached_but_not_certified_names_the_floor_or_the_evidence() -> None:
    grades = _grades(**{"control": (60, 2), "prune@0.9": (60, 2), "prune@0.8": (60, 2)})
    rows = _rows(**{"prune@0.9": ("held", True, 60), "prune@0.8": ("held", True, 60)})
    why = explain(rows, grades, LADDER, "prune@0.9", tolerance=0.95, full=(60, 3))
    assert why.startswith("floor: prune@0.8 held at 60x2, noise floor 5.5 % > 5 %")
    rows = _rows(**{"prune@0.9": ("held", True, 40)})
    why = explain(rows, grades, LADDER, "prune@0.9", tolerance=0.95, full=(60, 3))
    assert why.startswith("evidence: prune@0.9 held on 40 tasks, a ✓ needs 60")
    counts = tally(["#3 floor: x", "#4 futility: y", "#5 futility: z", "#6 what"])
    assert counts["futility"] == 2 and counts["floor"] == 1 and counts["other"] == 1

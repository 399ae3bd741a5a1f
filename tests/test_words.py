"""Counts read as English ("1 run", "1 error"), and a list row leaves out empty columns
(the trend's "change:" for a run that changed nothing)."""

from __future__ import annotations

from tokenlens.formatting import markdown_table, plural


def test_plural_counts() -> None:
    assert plural(1, "run") == "1 run"
    assert plural(0, "run") == "0 runs"
    assert plural(3, "error") == "3 errors"


def test_a_list_row_leaves_out_empty_cells() -> None:
    header = ("class", "run", "change")
    rows = [("extraction", "r1", ""), ("extraction", "r2", "⚠ noise floor moved")]
    text = markdown_table(header, rows, max_width=10)
    first, second = text.splitlines()
    assert "change" not in first and first.endswith("run: r1")
    assert "change: ⚠ noise floor moved" in second


def test_a_curve_row_with_one_error_says_one_error() -> None:
    from dataclasses import replace

    import numpy as np

    from tokenlens.calibration.summary import curve_records
    from tokenlens.decision import aggregate
    from tokenlens.simulate import DEFAULT_SCENARIOS, simulate_grades

    world = replace(DEFAULT_SCENARIOS[0], n_tasks=20)
    curve = aggregate(simulate_grades(world, np.random.default_rng(0)), tolerance=0.95)
    curve.table.loc[:, "n_errors"] = 1
    cells = [r["tasks/pairs"] for r in curve_records(curve)]
    assert cells and all(c.endswith(", 1 error") for c in cells), cells

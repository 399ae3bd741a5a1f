"""The calibration plot: every arm drawn, each kind of mark once per status colour, and
what every panel shares (axis titles, the reference lines' legend) said once."""

from __future__ import annotations

import pandas as pd
from matplotlib.container import ErrorbarContainer

from tests.grade_tables import cell, frame
from tokenlens.compress.arms import CONTROL
from tokenlens.decision import ALL_CLASSES, Curve, aggregate, decide
from tokenlens.plot import _STATUS_COLOUR, curve_figure, plot_images
from tokenlens.policy import Policy

TASKS = 20


def _curve() -> tuple[Curve, Policy]:
    """Two classes; in each, several arms share a status (so share a colour)."""
    cells = []
    for name in ("a", "b"):
        cells += [
            cell(name, "control", [[(60.0 + i, 60.0 + i)] for i in range(TASKS)]),
            cell(name, "safe", [[(60.0 + i, 60.0 + i)] for i in range(TASKS)], reduction=0.01),
            cell(name, "minify", [[(60.0 + i, 59.0 + i)] for i in range(TASKS)], reduction=0.05),
            cell(name, "prune@0.8", [[(60.0, 20.0)] for _ in range(TASKS)], reduction=0.2),
            cell(name, "prune@0.6", [[(60.0, 10.0)] for _ in range(TASKS)], reduction=0.35),
            cell(name, "select@0.6", [[(60.0, None)] for _ in range(TASKS)], reduction=0.3),
        ]
    curve = aggregate(frame(*cells), tolerance=0.95)
    return curve, decide(curve, calibration_id="plot-test-0002", model="m")


def _bounded(rows: pd.DataFrame) -> pd.DataFrame:
    arms = rows[rows["arm"] != CONTROL]
    return arms[arms["retention_low"].notna() & arms["retention_high"].notna()]


def test_every_arm_is_drawn_with_one_errorbar_per_status_colour() -> None:
    curve, policy = _curve()
    fig = curve_figure(curve, policy)
    names = [*curve.classes(), ALL_CLASSES]
    assert len(fig.axes) == len(names)  # a panel per class and the default, no blank one
    shared = False
    for ax, name in zip(fig.axes, names, strict=True):
        bounded = _bounded(curve.rows(name))
        colours = {_STATUS_COLOUR.get(str(s), "#555555") for s in bounded["status"]}
        shared = shared or len(colours) < len(bounded)
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == len(colours)
        drawn = sorted(x for bar in bars for x in bar.lines[0].get_xdata())
        assert drawn == sorted(100.0 * bounded["reduction"])  # every arm, at its reduction
        labels = [t.get_text() for t in ax.texts]
        assert any(label.startswith("prune r=0.6 (") for label in labels)
        assert any("not measured: select r=0.6" in label for label in labels)
    assert shared  # the case that used to be one artist per arm


def test_what_every_panel_shares_is_said_once() -> None:
    curve, policy = _curve()
    png, svg = plot_images(curve, policy)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert svg.count(">token reduction %<") == 1
    assert svg.count(">retention % (o pooled, 95% bounds; x per-pair)<") == 1
    assert svg.count(">tolerance<") == 1  # one legend for the figure
    assert svg.count("all classes (default)") == 1
    assert svg.count(">prune r=0.6 (") == len(curve.classes()) + 1  # each panel's labels


def test_labels_of_arms_near_100_percent_do_not_overlap() -> None:
    """Lossless arms with near-equal reductions all sit at the top: their labels go below
    the points, each at its own height, never on top of each other."""
    cells = [cell("a", "control", [[(60.0 + i, 60.0 + i)] for i in range(TASKS)])]
    for arm, reduction in (("safe", 0.01), ("minify", 0.02), ("prune@0.8", 0.03)):
        cells.append(
            cell("a", arm, [[(60.0 + i, 60.0 + i)] for i in range(TASKS)], reduction=reduction)
        )
    cells.append(
        cell("a", "prune@0.6", [[(60.0 + i, 60.0 + i)] for i in range(TASKS)], reduction=0.04)
    )
    curve = aggregate(frame(*cells), tolerance=0.95)
    fig = curve_figure(curve, decide(curve, calibration_id="plot-test-0003", model="m"))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    ax = fig.axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.texts if " (" in t.get_text()]
    assert len(boxes) == 4
    for i, one in enumerate(boxes):
        for other in boxes[i + 1 :]:
            assert not one.overlaps(other), (one, other)

"""The calibration's plot: reduction vs retention per class, with error bars and tolerance.

matplotlib's object API on the Agg canvas, so it never touches pyplot's global backend
(a calibration runs inside a Prefect worker that may plot from several threads).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tokenlens.compress.arms import CONTROL
from tokenlens.decision import ALL_CLASSES, Curve
from tokenlens.formatting import arm_label
from tokenlens.policy import Policy

_STATUS_COLOUR = {
    "held": "#2e7d32",
    "failed": "#c62828",
    "unfaithful": "#6a1b9a",
    "ignored": "#ef6c00",
    "not_reached": "#9e9e9e",
    "no_savings": "#9e9e9e",
    "unmeasurable": "#9e9e9e",
}


#: Vertical offsets (points) of arm labels, cycled along the x axis so that arms with
#: near-equal reductions do not print their names on top of each other.
_LABEL_OFFSETS = (6, -12, 16, -22)
#: Near 100 % every label goes below its point (above would run into the title): there
#: the offsets must stay apart by more than a 7-point line, or near-equal arms overlap.
_LABEL_OFFSETS_TOP = (-10, -22, -34, -46)


def plot_curve(curve: Curve, policy: Policy) -> bytes:
    """PNG bytes of `curve_figure`."""
    return plot_images(curve, policy)[0]


def plot_images(curve: Curve, policy: Policy) -> tuple[bytes, str]:
    """`curve_figure` as PNG bytes (the file, the Prefect artifact) and as SVG text with
    its text kept as text (the HTML report: sharp at any width, and its axis labels are
    readable by a browser test)."""
    fig = curve_figure(curve, policy)
    png, svg = io.BytesIO(), io.StringIO()
    fig.savefig(png, format="png")
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "tokenlens"}):
        fig.savefig(svg, format="svg")
    text = svg.getvalue()
    return png.getvalue(), text[text.index("<svg") :]


@dataclass
class _Marks:
    """One panel's points of one status colour, drawn as one artist each."""

    #: (x, y, distance to the lower bound, to the upper bound)
    bounded: list[tuple[float, float, float, float]] = field(default_factory=list)
    #: (x, y) with no bounds
    bare: list[tuple[float, float]] = field(default_factory=list)
    #: (x, per-pair mean retention)
    per_pair: list[tuple[float, float]] = field(default_factory=list)

    def draw(self, ax: Any, colour: str) -> None:
        if self.bounded:
            x, y, down, up = zip(*self.bounded, strict=True)
            ax.errorbar(x, y, yerr=[down, up], fmt="o", color=colour, capsize=3, clip_on=False)
        for points, marker in ((self.bare, "o"), (self.per_pair, "x")):
            if points:
                x, y = zip(*points, strict=True)
                ax.plot(x, y, marker, color=colour, ms=5, clip_on=False)


def _pct(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else 100.0 * float(value)


def curve_figure(curve: Curve, policy: Policy) -> Figure:
    """Reduction vs retention per class (0-100 %), one-sided 95 % bounds, tolerance.

    Every value is capped into 0-100 %, and both axes stay inside it: the y axis spans
    every point, bound and the tolerance (so an arm at 0 % is on the plot, not under it),
    and an arm with no measurement is named in the panel, not drawn at 0 %."""
    names = [*curve.classes(), ALL_CLASSES]
    names = [n for n in names if not curve.rows(n).empty]
    cols = min(3, max(len(names), 1))
    nrows = max(math.ceil(len(names) / cols), 1)
    width, height = 4.6 * cols, 3.5 * nrows
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    # Fixed margins (inches), not a layout engine: constrained layout measured every
    # label's extent and took ~3 s of a 6 s no-op rerun for a 3 x 3 grid.
    fig.subplots_adjust(
        left=0.62 / width,
        right=1 - 0.15 / width,
        bottom=0.5 / height,
        top=1 - 0.3 / height,
        wspace=0.28,
        hspace=0.5,
    )
    grid = fig.add_gridspec(nrows, cols)
    for index, name in enumerate(names):  # a panel per name, no empty axes after them
        _panel(fig.add_subplot(grid[index // cols, index % cols]), curve, policy, name)
    # What every panel shares is said once for the figure: the axis titles and the
    # legend of the reference lines (one text each, not one per panel: every text costs
    # its layout and glyphs at each of the two renderings).
    fig.supxlabel("token reduction %", fontsize=8, y=0.08 / height, va="bottom")
    fig.supylabel(
        "retention % (o pooled, 95% bounds; x per-pair)", fontsize=7, x=0.08 / width, ha="left"
    )
    lines: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            lines.setdefault(label, handle)
    if lines:
        fig.legend(
            list(lines.values()),
            list(lines),
            loc="lower right",
            bbox_to_anchor=(1 - 0.15 / width, 0.0),
            ncols=len(lines),
            fontsize=7,
            frameon=False,
        )
    return fig


def _panel(ax: Any, curve: Curve, policy: Policy, name: str) -> None:
    rows = curve.rows(name)
    entry = policy.default if name == ALL_CLASSES else policy.classes.get(name)
    arms = rows[rows["arm"] != CONTROL].sort_values("reduction")
    shown: list[float] = [100 * curve.tolerance]
    unmeasured: list[str] = []
    reductions = [v for v in (_pct(x) for x in arms["reduction"]) if v is not None]
    x_max = min(100.0, max([*reductions, 5.0]) + 8.0)
    marks: dict[str, _Marks] = {}
    for position, r in enumerate(arms.itertuples(index=False)):
        y = _pct(r.retention)
        if y is None:
            unmeasured.append(arm_label(str(r.arm)))
            continue
        x = _pct(r.reduction) or 0.0
        group = marks.setdefault(_STATUS_COLOUR.get(str(r.status), "#555555"), _Marks())
        low, high = _pct(r.retention_low), _pct(r.retention_high)
        if low is not None and high is not None:
            group.bounded.append((x, y, y - low, high - y))
            shown += [low, high]
        else:
            group.bare.append((x, y))
        per_pair = _pct(r.retention_mean)
        if per_pair is not None:
            group.per_pair.append((x, min(per_pair, 100.0)))
            shown.append(min(per_pair, 100.0))
        shown.append(y)
        right_half = x > 0.5 * x_max  # label towards the middle, so it is not cut off
        offsets = _LABEL_OFFSETS if y < 90.0 else _LABEL_OFFSETS_TOP  # not on the title
        dy = offsets[position % len(offsets)]
        ax.annotate(
            f"{arm_label(str(r.arm))} ({r.status})".replace("_", " "),
            (x, y),
            fontsize=7,
            xytext=(-4 if right_half else 4, dy),
            textcoords="offset points",
            ha="right" if right_half else "left",
        )
    for colour, group in marks.items():  # one artist per status colour, not one per arm
        group.draw(ax, colour)
    ax.axhline(100 * curve.tolerance, color="#1565c0", ls=":", lw=1, label="tolerance")
    bars = rows["bar"].dropna()
    if curve.mode == "mean" and len(bars):
        ax.axhline(100 * float(bars.iloc[0]), color="#1565c0", ls="--", lw=1, label="bar")
    floor = rows.loc[rows["arm"] == CONTROL, "noise_floor"].dropna()
    title = "all classes (default)" if name == ALL_CLASSES else name
    mark = entry.mark if entry is not None else ""
    floor_text = f", floor {100 * float(floor.iloc[0]):.1f}%" if len(floor) else ""
    # y fixed at the top (where matplotlib puts it with no ticks on top): an automatic
    # title position measures every y tick label at every draw.
    ax.set_title(f"{mark} {title}{floor_text}", fontsize=10, y=1.0)
    ax.set_xlim(0.0, x_max)
    ax.set_ylim(max(0.0, min(shown) - 8.0), 100.0)
    ax.tick_params(labelsize=7)
    if unmeasured:
        ax.text(
            0.98,
            0.04,
            "not measured: " + ", ".join(unmeasured),
            transform=ax.transAxes,
            ha="right",
            fontsize=7,
            color="#555555",
        )

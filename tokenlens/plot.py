"""The calibration's plot: reduction vs retention per class, with error bars and tolerance.

matplotlib's object API on the Agg canvas, so it never touches pyplot's global backend
(a calibration runs inside a Prefect worker that may plot from several threads).
"""

from __future__ import annotations

import io
import math
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
    "ignored": "#ef6c00",
    "not_reached": "#9e9e9e",
    "no_savings": "#9e9e9e",
    "unmeasurable": "#9e9e9e",
}


#: Vertical offsets (points) of arm labels, cycled along the x axis so that arms with
#: near-equal reductions do not print their names on top of each other.
_LABEL_OFFSETS = (6, -12, 16, -22)


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
    axes = fig.subplots(nrows, cols, squeeze=False)
    for index, name in enumerate(names):
        _panel(axes[index // cols][index % cols], curve, policy, name)
    for index in range(len(names), nrows * cols):
        axes[index // cols][index % cols].set_visible(False)
    return fig


def _panel(ax: Any, curve: Curve, policy: Policy, name: str) -> None:
    rows = curve.rows(name)
    entry = policy.default if name == ALL_CLASSES else policy.classes.get(name)
    arms = rows[rows["arm"] != CONTROL].sort_values("reduction")
    shown: list[float] = [100 * curve.tolerance]
    unmeasured: list[str] = []
    reductions = [v for v in (_pct(x) for x in arms["reduction"]) if v is not None]
    x_max = min(100.0, max([*reductions, 5.0]) + 8.0)
    for position, r in enumerate(arms.itertuples(index=False)):
        y = _pct(r.retention)
        if y is None:
            unmeasured.append(arm_label(str(r.arm)))
            continue
        x = _pct(r.reduction) or 0.0
        colour = _STATUS_COLOUR.get(str(r.status), "#555555")
        low, high = _pct(r.retention_low), _pct(r.retention_high)
        if low is not None and high is not None:
            ax.errorbar(
                [x],
                [y],
                yerr=[[y - low], [high - y]],
                fmt="o",
                color=colour,
                capsize=3,
                clip_on=False,
            )
            shown += [low, high]
        else:
            ax.plot([x], [y], "o", color=colour, ms=5, clip_on=False)
        per_pair = _pct(r.retention_mean)
        if per_pair is not None:
            ax.plot([x], [min(per_pair, 100.0)], "x", color=colour, ms=5, clip_on=False)
            shown.append(min(per_pair, 100.0))
        shown.append(y)
        right_half = x > 0.5 * x_max  # label towards the middle, so it is not cut off
        dy = _LABEL_OFFSETS[position % len(_LABEL_OFFSETS)]
        ax.annotate(
            f"{arm_label(str(r.arm))} ({r.status})".replace("_", " "),
            (x, y),
            fontsize=7,
            xytext=(-4 if right_half else 4, dy if y < 90.0 else -abs(dy)),  # not on the title
            textcoords="offset points",
            ha="right" if right_half else "left",
        )
    ax.axhline(100 * curve.tolerance, color="#1565c0", ls=":", lw=1, label="tolerance")
    bars = rows["bar"].dropna()
    if curve.mode == "mean" and len(bars):
        ax.axhline(100 * float(bars.iloc[0]), color="#1565c0", ls="--", lw=1, label="bar")
    floor = rows.loc[rows["arm"] == CONTROL, "noise_floor"].dropna()
    title = "all classes (default)" if name == ALL_CLASSES else name
    mark = entry.mark if entry is not None else ""
    floor_text = f", floor {100 * float(floor.iloc[0]):.1f}%" if len(floor) else ""
    ax.set_title(f"{mark} {title}{floor_text}", fontsize=10)
    ax.set_xlim(0.0, x_max)
    ax.set_xlabel("token reduction %", fontsize=8)
    ax.set_ylabel("retention % (o pooled, 95% bounds; x per-pair)", fontsize=7)
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
    ax.legend(fontsize=6, loc="lower left")

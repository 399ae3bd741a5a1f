"""The calibration's plot: reduction vs retention per class, with error bars and tolerance.

matplotlib's object API on the Agg canvas, so it never touches pyplot's global backend
(a calibration runs inside a Prefect worker that may plot from several threads).
"""

from __future__ import annotations

import io
import math

import pandas as pd
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


def plot_curve(curve: Curve, policy: Policy) -> bytes:
    """PNG bytes: reduction vs retention per class (0-100 %), one-sided 95 % bounds, tolerance.

    Every value is capped into 0-100 %, so the range that matters is never a flat line
    under an axis stretched by an unbounded estimate."""
    names = [*curve.classes(), ALL_CLASSES]
    names = [n for n in names if not curve.rows(n).empty]
    cols = min(3, max(len(names), 1))
    nrows = max(math.ceil(len(names) / cols), 1)
    width, height = 4.2 * cols, 3.3 * nrows
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
        ax = axes[index // cols][index % cols]
        rows = curve.rows(name)
        entry = policy.default if name == ALL_CLASSES else policy.classes.get(name)
        arms = rows[rows["arm"] != CONTROL].sort_values("reduction")
        for r in arms.itertuples(index=False):
            x = 100 * float(r.reduction) if not pd.isna(r.reduction) else 0.0
            y = 100 * float(r.retention) if not pd.isna(r.retention) else 0.0
            colour = _STATUS_COLOUR.get(str(r.status), "#555555")
            if not (pd.isna(r.retention_low) or pd.isna(r.retention_high)):
                yerr = [[y - 100 * r.retention_low], [100 * r.retention_high - y]]
                ax.errorbar([x], [y], yerr=yerr, fmt="o", color=colour, capsize=3, ms=5)
            else:
                ax.plot([x], [y], "o", color=colour, ms=5)
            ax.plot([x], [100 * float(r.retention_mean)], "x", color=colour, ms=5)
            ax.annotate(
                arm_label(str(r.arm)), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
        ax.axhline(100 * curve.tolerance, color="#1565c0", ls=":", lw=1, label="tolerance")
        bars = rows["bar"].dropna()
        if curve.mode == "mean" and len(bars):
            ax.axhline(100 * float(bars.iloc[0]), color="#1565c0", ls="--", lw=1, label="bar")
        title = "all classes (default)" if name == ALL_CLASSES else name
        mark = entry.mark if entry is not None else ""
        ax.set_title(f"{mark} {title}", fontsize=10)
        ax.set_xlim(left=0.0, right=max([*(100 * arms["reduction"].fillna(0)), 5.0]) + 5.0)
        ax.set_xlabel("token reduction %", fontsize=8)
        ax.set_ylabel("retention % (o pooled, 95% bounds; x per-pair)", fontsize=7)
        low = rows.loc[rows["arm"] != CONTROL, "retention_low"].dropna()
        bottom = min([100 * float(low.min()) if len(low) else 100.0, 100 * curve.tolerance])
        ax.set_ylim(max(0.0, bottom - 5.0), 101.0)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower left")
    for index in range(len(names), nrows * cols):
        axes[index // cols][index % cols].set_visible(False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()

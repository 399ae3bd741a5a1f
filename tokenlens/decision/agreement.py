"""How far two judges agree on the same pairs, and on the decisions they lead to."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import ALL_CLASSES, aggregate
from tokenlens.decision.grades import Mode, prepare
from tokenlens.stats import spearman

_EPS = 1e-12


@dataclass(frozen=True)
class JudgeAgreement:
    """How far two judges agree on the same pairs and on the same decisions."""

    judges: tuple[str, str]
    n_pairs: int
    #: Spearman rank correlation of per-pair retention (capped) between the judges.
    spearman_retention: float
    #: Fraction of pairs where one judge has retention >= tolerance and the other not.
    pair_disagreement: float
    n_cells: int
    #: Fraction of class x arm cells where the rule passes under one judge only.
    cell_disagreement: float
    disagreements: tuple[tuple[str, str, bool, bool], ...]


def judge_agreement(
    grades: pd.DataFrame,
    *,
    judges: tuple[str, str],
    tolerance: float,
    mode: Mode = "interval",
) -> JudgeAgreement:
    """Compare two judges that graded the same pairs (e.g. the metric and an LLM)."""
    df = prepare(grades)
    df = df[(df["judge_pass"] == 0) & df["usable"] & (df["arm"] != CONTROL)]
    keys = ["task_id", "arm", "replicate"]
    a = df[df["judge"] == judges[0]].set_index(keys)["ret_cap"].rename("a")
    b = df[df["judge"] == judges[1]].set_index(keys)["ret_cap"].rename("b")
    both = pd.concat([a, b], axis=1, join="inner")
    pass_a = both["a"] >= tolerance - _EPS
    pass_b = both["b"] >= tolerance - _EPS
    curve_a = aggregate(grades, tolerance=tolerance, mode=mode, judge=judges[0]).table
    curve_b = aggregate(grades, tolerance=tolerance, mode=mode, judge=judges[1]).table
    cells = curve_a[(curve_a["arm"] != CONTROL) & (curve_a["task_class"] != ALL_CLASSES)]
    merged = cells.merge(
        curve_b[["task_class", "arm", "passes"]], on=["task_class", "arm"], suffixes=("_a", "_b")
    )
    differ = merged[merged["passes_a"] != merged["passes_b"]]
    return JudgeAgreement(
        judges=judges,
        n_pairs=len(both),
        spearman_retention=spearman(both["a"], both["b"]),
        pair_disagreement=float((pass_a != pass_b).mean()) if len(both) else math.nan,
        n_cells=len(merged),
        cell_disagreement=float(len(differ) / len(merged)) if len(merged) else math.nan,
        disagreements=tuple(
            (str(r.task_class), str(r.arm), bool(r.passes_a), bool(r.passes_b))
            for r in differ.itertuples()
        ),
    )

"""People's grades correct the judge: a prediction-powered estimate of retention.

The judge grades every pair; people grade a sample of them (`tokenlens review`). Taken
alone, the people's pairs are too few to decide on, and the judge's are many but may be
biased (it may forgive a dropped fact a person would not). Prediction-powered inference
(Angelopoulos et al., 2023; the power-tuned PPI++ of Angelopoulos, Duchi & Zrnic, 2024)
uses both: the judge's mean over all pairs, corrected by the mean gap between people and
judge on the reviewed pairs,

    theta = mean_n(people) + lambda * (mean_N(judge) - mean_n(judge)),

with lambda = cov(people, judge) / ((1 + n / N) var(judge)) clipped into [0, 1]: 1 is
classical PPI (judge mean plus the rectifier), 0 ignores the judge, and the tuned value is
never less precise than either, to first order. Its variance is
var(people - lambda judge) / n + lambda^2 var(judge) / N; the one-sided bounds use t with
n - 1 degrees of freedom (the reviewed pairs are the scarce side).

Retention here is per pair, comp / clear of the same call (people grade one pair at a
time), capped like the rule's per-task ratios. Pairs are treated as independent draws:
the review samples across tasks, so few reviewed pairs share a task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from tokenlens.stats import t_quantile

#: Fewest reviewed pairs (with both grades from people) for a corrected figure.
MIN_REVIEWED = 3


@dataclass(frozen=True)
class PeopleEstimate:
    """Retention as people would grade it, from judge grades corrected by people's."""

    value: float
    low: float
    high: float
    judge_value: float  # the judge's mean over all pairs (same per-pair definition)
    n_reviewed: int
    n_all: int
    weight: float  # lambda: how much the judge's pairs count


def pair_retention(comp: ArrayLike, clear: ArrayLike, cap: float) -> np.ndarray:
    """comp / clear per pair, capped at `cap`; NaN where the cleartext grade is 0 or absent."""
    c = np.asarray(comp, dtype=float)
    k = np.asarray(clear, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(k > 0, c / np.where(k > 0, k, 1.0), np.nan)
    return np.minimum(out, cap)


def people_corrected(
    judge_all: ArrayLike,
    judge_reviewed: ArrayLike,
    people_reviewed: ArrayLike,
    *,
    alpha: float = 0.05,
) -> PeopleEstimate | None:
    """PPI++ mean of the people's retention; None with fewer than `MIN_REVIEWED` pairs.

    `judge_all`: the judge's retention on every pair; `judge_reviewed` and
    `people_reviewed`: the judge's and the people's on the reviewed pairs, aligned.
    """
    f_all = np.asarray(judge_all, dtype=float)
    f_all = f_all[np.isfinite(f_all)]
    f = np.asarray(judge_reviewed, dtype=float)
    y = np.asarray(people_reviewed, dtype=float)
    keep = np.isfinite(f) & np.isfinite(y)
    f, y = f[keep], y[keep]
    n, big_n = int(y.size), int(f_all.size)
    if n < MIN_REVIEWED or big_n < 2:
        return None
    var_f = float(np.var(f_all, ddof=1))
    if var_f > 0 and n > 1:
        cov = float(np.cov(y, f, ddof=1)[0, 1])
        weight = min(max(cov / ((1 + n / big_n) * var_f), 0.0), 1.0)
    else:
        weight = 1.0  # a judge that never varies: the rectifier alone carries the gap
    value = float(y.mean() + weight * (f_all.mean() - f.mean()))
    resid = y - weight * f
    var = float(np.var(resid, ddof=1)) / n + weight**2 * var_f / big_n
    half = t_quantile(1 - alpha, n - 1) * math.sqrt(max(var, 0.0))
    return PeopleEstimate(
        value=value,
        low=value - half,
        high=value + half,
        judge_value=float(f_all.mean()),
        n_reviewed=n,
        n_all=big_n,
        weight=weight,
    )

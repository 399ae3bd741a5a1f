"""Agreement between raters: Krippendorff's alpha with a bootstrap interval, and decisions.

Pure numpy/scipy on arrays, like `tokenlens.stats`.

Why Krippendorff's alpha: it takes any number of raters, tolerates missing values (a
person's "can't tell", a reviewer who skipped a case) and has an interval version for the
judge's 0-100 scale, where being 5 points apart matters less than 50. Its ordinal version
is reported next to it because a person and a judge can rank answers alike while using the
scale differently (one grades harshly); a large gap between the two says exactly that.

The interval (interval level) is a percentile bootstrap over *cases*: the two answers of a
pair share a request and a reference, so they are resampled together, never as
independent units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import binomtest

Level = Literal["interval", "ordinal"]

#: Bootstrap resamples for alpha's interval, and its coverage.
N_BOOT = 2000
CONFIDENCE = 0.95


def _metric_values(values: np.ndarray, level: Level) -> np.ndarray:
    """Values on which squared differences are the level's distance.

    Ordinal distance (Krippendorff 2011): delta(c, k) = (sum of n_g for g from c to k
    - (n_c + n_k) / 2)^2, which equals (t_k - t_c)^2 with t_c = N_c - n_c / 2, N the
    cumulative count of the pairable values up to c. So ordinal alpha is interval alpha
    on the values' mid-ranks t.
    """
    if level == "interval":
        return values
    finite = values[~np.isnan(values)]
    distinct, counts = np.unique(finite, return_counts=True)
    mid = np.cumsum(counts) - counts / 2.0
    out = np.full(values.shape, np.nan)
    ok = ~np.isnan(values)
    out[ok] = mid[np.searchsorted(distinct, values[ok])]
    return out


def krippendorff_alpha(data: np.ndarray, level: Level = "interval") -> float:
    """Alpha of a raters x units matrix (NaN = no value); NaN when undefined.

    Units with fewer than two values are not pairable and drop out. Alpha is undefined
    (NaN) with fewer than two pairable units' worth of values or when every value is equal.
    """
    matrix = np.asarray(data, dtype=float)
    if matrix.ndim != 2:
        raise ValueError(f"alpha needs a raters x units matrix, got shape {matrix.shape}")
    counts = (~np.isnan(matrix)).sum(axis=0)
    matrix = matrix[:, counts >= 2]
    counts = counts[counts >= 2]
    n = int(counts.sum())
    if n < 2 or matrix.shape[1] < 1:
        return math.nan
    x = _metric_values(matrix, level)
    s1 = np.nansum(x, axis=0)
    s2 = np.nansum(x * x, axis=0)
    # Sum over ordered pairs i != j within a unit of (x_i - x_j)^2 = 2 m S2 - 2 S1^2.
    within = (2 * counts * s2 - 2 * s1 * s1) / (counts - 1)
    observed = within.sum() / n
    t1, t2 = s1.sum(), s2.sum()
    expected = (2 * n * t2 - 2 * t1 * t1) / (n * (n - 1))
    if expected <= 1e-12:
        return math.nan
    return float(1.0 - observed / expected)


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95 % bootstrap interval and what it rests on."""

    value: float
    low: float
    high: float
    n_cases: int
    n_units: int

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    def text(self) -> str:
        if not self.defined:
            return f"n/a ({self.n_cases} cases)"
        if math.isnan(self.low):
            return f"{self.value:.2f} (no interval; {self.n_cases} cases)"
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.n_cases} cases)"


def _case_sums(matrix: np.ndarray, case_of: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per case: [sum of within-unit disagreement, pairable values, sum x, sum x^2].

    Alpha's observed and expected disagreement are built from these sums alone (see
    `krippendorff_alpha`), so a bootstrap replicate is a weighted sum over cases.
    """
    counts = (~np.isnan(matrix)).sum(axis=0)
    s1 = np.nansum(matrix, axis=0)
    s2 = np.nansum(matrix * matrix, axis=0)
    within = (2 * counts * s2 - 2 * s1 * s1) / (counts - 1)
    index = np.searchsorted(ids, case_of)
    return np.stack(
        [np.bincount(index, weights=w, minlength=ids.size) for w in (within, counts, s1, s2)]
    )


def bootstrap_alpha(
    data: np.ndarray,
    cases: Sequence[int] | np.ndarray,
    level: Level = "interval",
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Estimate:
    """Alpha and its percentile interval, resampling whole cases (`cases[u]` = case of unit u).

    Interval level only gets an interval: there alpha is a function of per-case sums, so
    the replicates are exact and vectorised. Ordinal alpha re-ranks the values of every
    replicate, which would cost a loop per replicate; it is reported as a point estimate
    (low/high NaN) next to the interval figure.
    """
    matrix = np.asarray(data, dtype=float)
    case_of = np.asarray(cases)
    if case_of.shape != (matrix.shape[1],):
        raise ValueError("`cases` needs one case id per unit (column)")
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    matrix, case_of = matrix[:, pairable], case_of[pairable]
    ids = np.unique(case_of)
    value = krippendorff_alpha(matrix, level)
    if level != "interval" or not math.isfinite(value) or ids.size < 2:
        return Estimate(value, math.nan, math.nan, int(ids.size), int(matrix.shape[1]))
    sums = _case_sums(matrix, case_of, ids)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, ids.size, (n_boot, ids.size))
    weights = np.stack([np.bincount(row, minlength=ids.size) for row in picks]).astype(float)
    within, n, t1, t2 = sums @ weights.T
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (2 * n * t2 - 2 * t1 * t1) / (n * (n - 1))
        draws = 1.0 - (within / n) / expected
    draws = draws[np.isfinite(draws) & (expected > 1e-12)]
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(draws, [tail, 1 - tail]) if draws.size else (math.nan, math.nan)
    return Estimate(value, float(low), float(high), int(ids.size), int(matrix.shape[1]))


# --------------------------------------------------------------------------- decisions


def retention(clear: float | None, comp: float | None) -> float | None:
    """comp / clear capped at 1, as the decision reads it; None when undefined."""
    if clear is None or comp is None or clear <= 0:
        return None
    return min(comp / clear, 1.0)


def loses(clear: float | None, comp: float | None, tolerance: float) -> bool | None:
    """Is the second answer's loss beyond the tolerance? None when it cannot be said."""
    kept = retention(clear, comp)
    return None if kept is None else kept < tolerance - 1e-12


@dataclass(frozen=True)
class DecisionAgreement:
    """How often two raters reach the same "is B's loss beyond the tolerance?" call."""

    n: int
    agree: int
    only_first: int  # first rater says loss, second does not
    only_second: int
    low: float  # Clopper-Pearson 95 % interval of the agreement rate
    high: float

    @property
    def rate(self) -> float:
        return self.agree / self.n if self.n else math.nan

    def text(self) -> str:
        if not self.n:
            return "n/a (no pair both could decide)"
        return (
            f"{self.rate:.0%} [{self.low:.0%}, {self.high:.0%}] of {self.n} pairs "
            f"(loss by the first only: {self.only_first}, by the second only: {self.only_second})"
        )


def decision_agreement(
    first: Sequence[bool | None], second: Sequence[bool | None]
) -> DecisionAgreement:
    """Agreement of two raters' loss calls, over the pairs both could decide."""
    both = [(a, b) for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    n = len(both)
    agree = sum(a == b for a, b in both)
    if n:
        ci = binomtest(agree, n).proportion_ci(confidence_level=CONFIDENCE)
        low, high = float(ci.low), float(ci.high)
    else:
        low = high = math.nan
    return DecisionAgreement(
        n=n,
        agree=agree,
        only_first=sum(a and not b for a, b in both),
        only_second=sum(b and not a for a, b in both),
        low=low,
        high=high,
    )

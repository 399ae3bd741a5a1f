"""Retention statistics with honest error bars, clustered by task.

Why clustered SEs with t(G-1), not a percentile bootstrap, by default: replicates of one
task share the task's difficulty, so the independent unit is the task, not the pair. A
class in the starter set has ~5 tasks; with so few clusters a percentile bootstrap is too
narrow (it cannot see beyond the 5 values it resamples) while the cluster-robust sandwich
with the G/(G-1) correction and a Student t with G-1 degrees of freedom keeps close to
nominal coverage (Cameron & Miller's small-G advice). It is closed-form, so it needs no
seed and costs nothing. A seeded task bootstrap is kept as an alternative
(`method="bootstrap"`), and the simulation study (`tokenlens.simulate`) measures both.

Why the arms' one-sided bounds are skew-corrected (`method="skew_t"`, what the decision
rule uses): per-task retention under compression is a mixture — most tasks untouched, a
few hurt badly — so it is skewed to the left, and a sample that happens to hold only one
hurt task has a high mean *and* a small spread. The t bound then clears the tolerance
too often: an arm truly one point below a 95 % tolerance was applied in 6.8-7.7 % of
simulated calibrations at 20 tasks (the interval study in docs/decision-rule.md).
Hall's (1992) monotone transformation of the studentized mean removes the skewness
term of its Edgeworth expansion. It is closed-form (no seed, no resampling: the
sequential loop reads bounds after every round), matches a task bootstrap-t to within a
point in the same study, and is never allowed to be narrower than the t bound. Tried and
dropped there: the task percentile bootstrap and BCa (too narrow at 20 tasks, 5.9-7.5 %),
empirical likelihood (F-calibrated, 5.7 % at 20 x 1) and betting confidence sequences
for bounded means (valid against every distribution, so at 20 tasks they can never clear
a 95 % tolerance: a mass of 6 % at zero is invisible to 20 draws 29 % of the time).

The estimands:

* Capped mean retention: mean over pairs of min(comp/clear, 1). What `--mode mean` (the
  seed's rule) reads: compression never earns credit for a lucky draw.
* Per-task retention (what `--mode interval` reads): for each task, the sum of its
  compressed answers' grades over the sum of its *uncompressed* readings of the same
  replicates; then the mean over tasks, with a Student-t bound over tasks. Every
  replicate has up to three uncompressed readings: the cleartext answer as graded in the
  arm's own judge call, the same answer as graded in the control's call, and the
  control's second, independent cleartext answer. Their mean is a steadier reference than
  one cleartext grade, and comparing within a task and replicate removes the task's
  difficulty. Each task counts once, so harm concentrated on hard, low-scoring tasks is
  not diluted by easy ones (a ratio of sums over all tasks would weight easy tasks more
  and read such an arm too high). Uncapped ratios are unbiased where capped per-pair
  means are not (capping pulls a noisy mean down: that is what the control's floor
  reads), so no floor is subtracted; the floor still decides measurability and ✓ vs ?.
  The simulation study (`tokenlens.simulate`, `bench/bench_simulation.py`) chose it over
  the older "1 + R_arm - R_control" difference of ratio-of-sums: fewer false
  applications where harm sits on hard tasks, more power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

IntervalMethod = Literal["cluster_t", "bootstrap", "skew_t"]
CONFIDENCE = 0.95

#: The largest sample skewness (either sign) the skew correction takes at face value.
#: One hurt task among n reads about -sqrt(n) (-6 at 40 tasks, -7.5 at 60), far outside
#: the range where Hall's expansion holds: taken as read, the bound for one task of n
#: losing 40 % was ~3.5x the t width at 20, 40 and 60 tasks alike, so more tasks bought
#: no power (an arm at 0.99 read without noise was held in 57 %, 45 % and 45 % of
#: samples). Capped at 3 it is 1.7x at 40 tasks and 1.4x at 60 (4.2x at 20: no less
#: cautious there); no sample of 11 tasks or fewer reaches the cap. Chosen on seven
#: simulated worlds (docs/decision-rule.md, `bench/bench_skew_cap.py`).
SKEW_CAP = 3.0
BOOTSTRAP_RESAMPLES = 2000

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval; `low`/`high` are None when it cannot have one."""

    mean: float
    low: float | None
    high: float | None
    n_clusters: int

    def shifted(self, offset: float, *, negate: bool = False) -> Estimate:
        """`offset + x` (or `offset - x`), interval mapped accordingly."""
        if negate:
            low = None if self.high is None else offset - self.high
            high = None if self.low is None else offset - self.low
            return Estimate(offset - self.mean, low, high, self.n_clusters)
        low = None if self.low is None else offset + self.low
        high = None if self.high is None else offset + self.high
        return Estimate(offset + self.mean, low, high, self.n_clusters)


def retention(grade_comp: ArrayLike, grade_clear: ArrayLike, *, cap: bool = True) -> Array:
    """Per-pair retention comp/clear; capped at 1.0 unless `cap=False`.

    A cleartext grade of 0 has no ratio: it marks the task broken for that replicate and
    gives NaN here (callers count and report those, never treat them as 1.0).
    """
    comp = np.asarray(grade_comp, dtype=float)
    clear = np.asarray(grade_clear, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(clear > 0, comp / np.where(clear > 0, clear, 1.0), np.nan)
    return np.minimum(ratio, 1.0) if cap else ratio


def capped_mean(grade_comp: ArrayLike, grade_clear: ArrayLike) -> float:
    """Mean of min(comp/clear, 1) over pairs with a non-zero cleartext grade (NaN if none)."""
    values = retention(grade_comp, grade_clear)
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else math.nan


@lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """Student t quantile for p in (0.5, 1), df >= 1 (cached: it is asked often).

    `scipy.special.stdtrit` is what `scipy.stats.t.ppf` computes, without importing
    `scipy.stats` (~0.5 s of every calibration's start-up)."""
    if not 0.5 < p < 1.0 or df < 1:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    return float(special.stdtrit(df, p))


def _as_float(values: ArrayLike) -> Array:
    return np.asarray(values, dtype=float)


def _bootstrap_weights(n: int, seed: int, resamples: int) -> Array:
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(float)


def _percentile_interval(values: Array, confidence: float) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if finite.size < 10:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    return float(low), float(high)


def ratio_estimate(
    num: ArrayLike,
    den: ArrayLike,
    *,
    confidence: float = CONFIDENCE,
    method: IntervalMethod = "cluster_t",
    seed: int = 0,
) -> Estimate:
    """Sum(num)/sum(den) over clusters (tasks), with a task-clustered interval.

    `num[g]` and `den[g]` are cluster g's sums (e.g. comp grades and clear grades of a
    task's replicates; or capped retentions and pair counts, which gives the capped mean).
    """
    return ratio_difference(num, den, None, None, confidence=confidence, method=method, seed=seed)


def ratio_difference(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike | None,
    den_b: ArrayLike | None,
    *,
    confidence: float = CONFIDENCE,
    method: IntervalMethod = "cluster_t",
    seed: int = 0,
) -> Estimate:
    """R_a - R_b (or R_a alone when b is None) for ratios over the SAME clusters, paired.

    Clusters line up by index; a cluster absent from one side carries zeros there. The
    cluster-t interval linearises each ratio (influence of cluster g on R = (num_g - R
    den_g) / sum(den)), sums the two influences per cluster, and applies the G/(G-1)
    sandwich with t(G-1). Fewer than two clusters: no interval.
    """
    na, da = _as_float(num_a), _as_float(den_a)
    paired = num_b is not None and den_b is not None
    nb = _as_float(num_b) if num_b is not None and paired else np.zeros_like(na)
    db = _as_float(den_b) if den_b is not None and paired else np.ones_like(da)
    if not (na.shape == da.shape == nb.shape == db.shape) or na.ndim != 1:
        raise ValueError("ratio_difference needs 1-d arrays of equal length, one per cluster")
    if da.sum() <= 0 or (paired and db.sum() <= 0):
        return Estimate(math.nan, None, None, int(na.size))
    r_a = na.sum() / da.sum()
    r_b = nb.sum() / db.sum() if paired else 0.0
    point = float(r_a - r_b)
    g = int(na.size)
    if g < 2:
        return Estimate(point, None, None, g)
    if method == "bootstrap":
        w = _bootstrap_weights(g, seed, BOOTSTRAP_RESAMPLES)
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = (w @ na) / (w @ da)
            if paired:
                boot = boot - (w @ nb) / (w @ db)
        low, high = _percentile_interval(boot, confidence)
        return Estimate(point, low, high, g)
    influence = (na - r_a * da) / da.sum()
    if paired:
        influence = influence - (nb - r_b * db) / db.sum()
    se = math.sqrt(g / (g - 1) * float(np.sum(influence**2)))
    q = t_quantile(0.5 + confidence / 2, g - 1)
    half = q * se
    if method == "skew_t":
        gamma = float(np.clip(skewness(influence), -SKEW_CAP, SKEW_CAP))
        low_k = skew_factor(gamma, q, g)
        high_k = skew_factor(-gamma, q, g)
        return Estimate(point, point - half * low_k, point + half * high_k, g)
    return Estimate(point, point - half, point + half, g)


def skewness(values: ArrayLike) -> float:
    """Sample skewness mean(d^3) / mean(d^2)^1.5 (0 when the values do not vary)."""
    v = _as_float(values)
    d = v - v.mean()
    m2 = float(np.mean(d**2))
    return 0.0 if m2 <= 0 else float(np.mean(d**3)) / m2**1.5


def skew_factor(gamma: float, q: float, n: int) -> float:
    """How much wider than the t half-width a one-sided *lower* bound must be for data of
    skewness `gamma` (>= 1: the bound is never closer than the t bound).

    Hall's (1992) monotone transformation of the studentized mean,
    g(S) = ((1 + gamma S / 3)^3 - 1) / gamma + gamma / (6 n), removes the skewness term
    of its Edgeworth expansion; inverting g at the t quantile `q` gives the bound. Left
    skew (a few tasks hurt badly, most untouched: gamma < 0) widens the lower bound,
    which is where the plain t bound let harmful arms through (`bench_simulation.py`).
    """
    return float(skew_factors(np.array([gamma], dtype=float), q, n)[0])


def skew_factors(gamma: Array, q: float, n: int) -> Array:
    """`skew_factor` for many skewnesses at once (the planner's resampled bounds)."""
    y = q / math.sqrt(n)
    flat = np.abs(gamma) < 1e-9
    g = np.where(flat, 1.0, gamma)
    u = (np.cbrt(1.0 + g * (y - g / (6 * n))) - 1.0) * 3.0 / g
    return np.where(flat, 1.0, np.maximum(1.0, u / y))


def lower_bounds(samples: Array, level: float) -> Array:
    """The decision's one-sided lower bound at `level` on the mean of each row of
    `samples` (rows of per-task retentions): what `ratio_estimate(row, ones,
    method="skew_t")` gives as `low`, for many rows at once."""
    n = samples.shape[1]
    mean = samples.mean(axis=1)
    d = samples - mean[:, None]
    m2 = np.mean(d**2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma = np.where(m2 > 0, np.mean(d**3, axis=1) / m2**1.5, 0.0)
    se = np.sqrt(np.sum(d**2, axis=1) / ((n - 1) * n))
    q = t_quantile(level, n - 1)
    return mean - q * se * skew_factors(np.clip(gamma, -SKEW_CAP, SKEW_CAP), q, n)


@dataclass(frozen=True)
class FloorSplit:
    """The noise floor split into judge inconsistency and sampling noise.

    From control pairs judged twice: the judge's own variance is half the mean squared
    difference between the two judgements of the same pair; the rest of the control's
    retention variance is sampling. The floor is split in proportion to the two
    variances (they add in variance, so this is an apportionment, not an identity).
    """

    judge: float
    sampling: float
    judge_sd: float
    total_sd: float
    n_pairs: int


def split_noise_floor(
    first: ArrayLike, second: ArrayLike, *, floor: float, all_control: ArrayLike | None = None
) -> FloorSplit | None:
    """Apportion `floor` using per-pair uncapped control retention judged twice.

    `first`/`second` are the two judgements of the same pairs (aligned); `all_control`
    is every control retention (default: `first`) for the total variance.
    """
    a, b = _as_float(first), _as_float(second)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    total = _as_float(all_control if all_control is not None else a)
    total = total[np.isfinite(total)]
    if a.size < 2 or total.size < 2:
        return None
    judge_var = float(np.mean((a - b) ** 2) / 2)
    total_var = float(np.var(total, ddof=1))
    share = 1.0 if total_var <= 0 and judge_var > 0 else 0.0
    if total_var > 0:
        share = min(judge_var / total_var, 1.0)
    floor = max(floor, 0.0)
    return FloorSplit(
        judge=floor * share,
        sampling=floor * (1 - share),
        judge_sd=math.sqrt(judge_var),
        total_sd=math.sqrt(max(total_var, 0.0)),
        n_pairs=int(a.size),
    )


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman rank correlation; NaN when either side is constant or n < 3."""
    a, b = _as_float(x), _as_float(y)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


@dataclass(frozen=True)
class Spread:
    """How a linearised per-pair retention varies: between tasks and within a task.

    What the planner needs: with n tasks x r repeats the estimate's variance is about
    (between**2 + within**2 / r) / n. `within` is None when no task had two replicates
    (the split is then unknown and the planner treats all of it as between-task spread,
    which never understates the tasks needed).
    """

    between: float
    within: float | None


def spread(num: ArrayLike, den: ArrayLike, cluster: ArrayLike, ratio: float) -> Spread | None:
    """Split the spread of per-pair influence (num - ratio*den)/mean(den) by cluster."""
    n_, d_ = _as_float(num), _as_float(den)
    codes = np.asarray(cluster, dtype=int)
    if n_.size < 2 or not np.isfinite(ratio) or d_.mean() <= 0:
        return None
    e = (n_ - ratio * d_) / d_.mean()
    counts = np.bincount(codes).astype(float)
    present = counts > 0
    means = np.bincount(codes, weights=e)[present] / counts[present]
    if means.size < 2:
        return None
    resid = e - (np.bincount(codes, weights=e) / np.where(counts > 0, counts, 1))[codes]
    dof = float(np.sum(counts[present] - 1))
    within_var = float(np.sum(resid**2) / dof) if dof > 0 else None
    mean_reps = float(np.mean(counts[present]))
    between_var = float(np.var(means, ddof=1))
    if within_var is not None:
        between_var = max(between_var - within_var / mean_reps, 0.0)
        return Spread(math.sqrt(between_var), math.sqrt(within_var))
    return Spread(math.sqrt(between_var), None)


def tasks_for_power(
    effect: float, spread_: Spread, repeats: int, *, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """Fewest tasks n whose one-sided test at `alpha` has `power` for a true margin `effect`.

    None when the margin is not positive (no design certifies an arm at or below the
    tolerance) or when more than 100,000 tasks would be needed.
    """
    if not effect > 0:
        return None
    within = spread_.within if spread_.within is not None else 0.0
    var = spread_.between**2 + within**2 / max(repeats, 1)
    if var <= 0:
        return 2
    for n in range(2, 100_001):
        need = t_quantile(1 - alpha, n - 1) + float(special.stdtrit(n - 1, power))
        if effect >= need * math.sqrt(var / n):
            return n
    return None

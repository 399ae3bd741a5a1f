"""Alpha spending: how a sequential calibration keeps its 5 % error across repeated looks.

Looking at the data after every round and stopping as soon as an arm clears the bar would
inflate the false-application rate: every look is another chance for a lucky draw. The
group-sequential remedy (Lan & DeMets) spends the error over the looks with a spending
function of the *information fraction* t (how much of the final precision a look has),
and sets each look's boundary so that the chance of crossing at that look, and not
before, is exactly what was spent. The O'Brien-Fleming-type function spends almost
nothing early (only overwhelming evidence stops a round early) and keeps nearly the whole
5 % for the last look, so a sequential run loses little power against a fixed one.

The looks' statistics are nested (each adds tasks or repeats to the last), so they are
correlated as corr(Z_i, Z_j) = sqrt(t_i / t_j); the boundaries use that joint normal law
(scipy's multivariate normal), not a Bonferroni split.

The normal law comes from `scipy.special` (what `scipy.stats.norm` computes), and
`scipy.stats` / `scipy.optimize` load only when boundaries are computed: this module is
imported by every calibration's flow, sequential or not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import ndtr, ndtri

#: A boundary that spends nothing (z this high is never crossed in practice).
NEVER = 8.0


def power_spent(t: float, alpha: float, rho: float = 1.5) -> float:
    """Cumulative one-sided error spent by fraction t (Kim-DeMets power family, alpha t^rho).

    rho = 1.5 spends more early than O'Brien-Fleming (so clear arms stop sooner) and keeps
    most of the error for the last look (so borderline arms keep their power)."""
    if t <= 0:
        return 0.0
    return float(alpha * min(t, 1.0) ** rho)


def obrien_fleming_spent(t: float, alpha: float) -> float:
    """Cumulative one-sided error spent by information fraction t (Lan-DeMets OBF type)."""
    if t <= 0:
        return 0.0
    z = ndtri(1 - alpha / 2)
    return float(min(alpha, 2 * (1 - ndtr(z / math.sqrt(min(t, 1.0))))))


def _below_all(bounds: Sequence[float], corr: np.ndarray) -> float:
    """P(Z_1 < b_1, ..., Z_k < b_k) for a standard normal vector with correlation `corr`."""
    if not bounds:
        return 1.0
    if len(bounds) == 1:
        return float(ndtr(bounds[0]))
    from scipy.stats import multivariate_normal

    # The cdf is a quasi-Monte Carlo integral: its random shifts come from a fixed seed, so
    # the same looks always get the same boundaries (scipy's default is the global state).
    law = multivariate_normal(mean=np.zeros(len(bounds)), cov=corr)
    return float(law.cdf(np.array(bounds), rng=np.random.default_rng(0)))


def nominal_alphas(
    fractions: Sequence[float], alpha: float, spent: Callable[[float, float], float] | None = None
) -> list[float]:
    """Each look's one-sided nominal error, for looks at increasing information fractions.

    The last fraction is the final look (normally 1.0). Returns 1 - Phi(boundary_k).
    `spent` is the spending function (default: the power family, rho 1.5).
    """
    from scipy import optimize

    spent = spent or power_spent
    t = np.asarray(fractions, dtype=float)
    if t.size == 0:
        return []
    if np.any(np.diff(t) <= 0) or t[0] <= 0:
        raise ValueError(f"information fractions must increase from above 0, got {list(t)}")
    t = t / t[-1]
    corr = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    bounds: list[float] = []
    spent_before = 0.0
    for k in range(t.size):
        spend = spent(float(t[k]), alpha) - spent_before
        spent_before += max(spend, 0.0)
        if spend <= 1e-12:
            bounds.append(NEVER)
            continue
        stay = _below_all(bounds, corr[:k, :k])
        sub = corr[: k + 1, : k + 1]

        def excess(
            c: float, stay: float = stay, sub: np.ndarray = sub, spend: float = spend
        ) -> float:
            return stay - _below_all([*bounds, c], sub) - spend

        if excess(NEVER) > 0:  # cannot spend that much at this look
            bounds.append(NEVER)
            continue
        bounds.append(float(optimize.brentq(excess, -NEVER, NEVER, xtol=1e-6)))
    return [float(1 - ndtr(b)) for b in bounds]

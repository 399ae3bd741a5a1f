"""The simulation's fast path decides exactly as the slow one on the same draws.

The sequential design's look boundaries are a multivariate normal integral (~1 s each);
they are cached per schedule, which made the paired study (`bench_simulation.py
--paired`) about three times faster. A cache may not change a decision: the integral is
seeded, so the same looks always get the same boundaries, and a cached run publishes what
an uncached one does.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import tokenlens.decision.sequential as sequential
from tokenlens.decision.sequential import ClassPlan, SequentialSettings, run_sequential
from tokenlens.decision.spending import nominal_alphas
from tokenlens.simulate import simulate_grades
from tokenlens.simulate_sequential import table_oracle
from tokenlens.simulate_study import LADDER, WORLDS


def test_the_look_boundaries_do_not_depend_on_the_global_random_state() -> None:
    fractions = [0.2, 0.45, 0.7, 1.0]
    np.random.seed(1)
    first = nominal_alphas(fractions, 0.05)
    np.random.seed(2)
    assert nominal_alphas(fractions, 0.05) == first


def _run(seed: int) -> pd.DataFrame:
    world = replace(WORLDS["noisy"], n_tasks=60, replicates=3, arms=LADDER)
    table = simulate_grades(world, np.random.default_rng(seed))
    arms = tuple(a.key for a in sorted(LADDER, key=lambda a: a.reduction))
    plan = ClassPlan("sim", tuple(sorted(set(table["task_id"]))), arms)
    result = run_sequential([plan], table_oracle(table), SequentialSettings(max_repeats=3))
    return result.curve.table[["arm", "n_tasks", "n_pairs", "retention_low", "status", "chosen"]]


@pytest.mark.parametrize("seed", [3, 8])
def test_cached_boundaries_publish_what_uncached_ones_do(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _run(seed)
    fast_again = _run(seed)  # the cache is warm now
    slow_alphas = sequential._look_alphas.__wrapped__  # type: ignore[attr-defined]
    monkeypatch.setattr(sequential, "_look_alphas", slow_alphas)
    slow = _run(seed)
    pd.testing.assert_frame_equal(fast, slow)
    pd.testing.assert_frame_equal(fast_again, slow)

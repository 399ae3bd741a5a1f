"""Retention arithmetic and the clustered intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenlens.stats import (
    capped_mean,
    ratio_difference,
    ratio_estimate,
    retention,
    spearman,
    split_noise_floor,
    t_quantile,
)


def test_retention_caps_at_one_and_zero_cleartext_is_not_a_ratio() -> None:
    values = retention([90, 50, 10], [80, 100, 0])
    assert values[0] == 1.0  # compressed scored higher: no credit
    assert values[1] == 0.5
    assert math.isnan(values[2])  # broken, never 1.0
    uncapped = retention([90, 50], [80, 100], cap=False)
    assert uncapped[0] == pytest.approx(1.125)


def test_capped_mean_does_not_let_a_lucky_pair_pay_for_a_loss() -> None:
    # One pair +20 %, one pair -20 %: uncapped would average to 1.0.
    assert capped_mean([120, 80], [100, 100]) == pytest.approx(0.9)
    assert capped_mean([50, 50], [0, 100]) == pytest.approx(0.5)  # the broken pair is skipped


@pytest.mark.parametrize(
    ("df", "expected"), [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (30, 2.042)]
)
def test_t_quantile_matches_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)


def test_ratio_estimate_equals_hand_computed_cluster_t() -> None:
    per_task = np.array([0.8, 0.9, 0.7, 0.85])
    est = ratio_estimate(per_task * 100, np.full(4, 100.0))
    se = per_task.std(ddof=1) / math.sqrt(4)
    assert est.mean == pytest.approx(per_task.mean())
    assert est.high - est.mean == pytest.approx(t_quantile(0.975, 3) * se)
    assert est.n_clusters == 4


def test_single_cluster_has_no_interval() -> None:
    est = ratio_estimate([90.0], [100.0])
    assert est.mean == pytest.approx(0.9) and est.low is None and est.high is None


def test_paired_difference_cancels_a_shared_task_effect() -> None:
    # Task difficulty moves both arm and control together: the pairing removes it.
    clear = np.array([300.0, 150.0, 240.0, 270.0, 200.0])
    ctrl = clear * np.array([0.98, 0.96, 0.99, 0.97, 0.95])
    arm = ctrl - clear * 0.05
    paired = ratio_difference(arm, clear, ctrl, clear)
    assert paired.mean == pytest.approx(-0.05)
    assert paired.high - paired.low < 1e-9  # identical shift on every task: no spread


def test_bootstrap_is_seeded_and_deterministic() -> None:
    rng = np.random.default_rng(3)
    num, den = rng.uniform(70, 90, 12), np.full(12, 100.0)
    a = ratio_estimate(num, den, method="bootstrap", seed=7)
    b = ratio_estimate(num, den, method="bootstrap", seed=7)
    c = ratio_estimate(num, den, method="bootstrap", seed=8)
    assert a == b
    assert a.low is not None and a.low < a.mean < (a.high or 0)
    assert (a.low, a.high) != (c.low, c.high)


def test_floor_split_attributes_judge_and_sampling_variance() -> None:
    rng = np.random.default_rng(0)
    sampling = rng.normal(0, 0.06, 400)
    first = 1 + sampling + rng.normal(0, 0.03, 400)
    second = 1 + sampling + rng.normal(0, 0.03, 400)
    split = split_noise_floor(first, second, floor=0.04)
    assert split is not None
    assert split.judge + split.sampling == pytest.approx(0.04)
    # judge variance 0.03^2 of total 0.03^2 + 0.06^2 = 20 %
    assert split.judge / 0.04 == pytest.approx(0.2, abs=0.06)
    assert split.judge_sd == pytest.approx(0.03, abs=0.005)


def test_a_perfectly_consistent_judge_gets_no_share() -> None:
    same = np.array([0.9, 1.0, 0.95, 1.05])
    split = split_noise_floor(same, same, floor=0.03)
    assert split is not None and split.judge == 0.0 and split.sampling == pytest.approx(0.03)


def test_rank_correlation() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_the_skew_corrected_bound_widens_only_towards_a_long_tail() -> None:
    from tokenlens.stats import ratio_estimate, skew_factor

    assert skew_factor(0.0, 1.73, 20) == 1.0
    assert skew_factor(-3.0, 1.73, 20) > 1.2  # a few tasks hurt badly: the lower bound drops
    assert skew_factor(3.0, 1.73, 20) == 1.0  # never closer than the t bound
    hurt = np.array([1.0] * 18 + [0.6, 0.7]) + np.linspace(-0.01, 0.01, 20)
    t = ratio_estimate(hurt, np.ones(20), confidence=0.9)
    skew = ratio_estimate(hurt, np.ones(20), confidence=0.9, method="skew_t")
    assert skew.mean == t.mean
    assert skew.low is not None and t.low is not None and skew.low < t.low - 0.01
    assert skew.high is not None and t.high is not None and skew.high == pytest.approx(t.high)


def test_more_tasks_buy_power_when_one_task_is_hurt() -> None:
    # One task of n loses 40 %, the rest are untouched. Its sample skewness is about
    # -sqrt(n); taken as read, the skew correction made the bound ~3.5x the t width at
    # any n, so 40 tasks failed a 95 % tolerance that a mean of 0.99 clears. Capped, the
    # bound still sits below the t bound, and 20 tasks stay as cautious as before.
    from tokenlens.stats import ratio_estimate, skewness

    def bounds(n: int) -> tuple[float, float]:
        x = np.array([1.0] * (n - 1) + [0.6]) + np.linspace(-0.005, 0.005, n)
        skew = ratio_estimate(x, np.ones(n), confidence=0.9, method="skew_t").low
        t = ratio_estimate(x, np.ones(n), confidence=0.9).low
        assert skewness(x) < -3 and skew is not None and t is not None
        return skew, t

    skew_40, t_40 = bounds(40)
    assert 0.95 <= skew_40 < t_40 - 0.005
    skew_60, t_60 = bounds(60)
    assert skew_40 < skew_60 < t_60
    skew_20, _ = bounds(20)
    assert skew_20 < 0.9


def test_skew_corrected_bounds_hold_their_level_where_t_does_not() -> None:
    # 20 tasks, 17 % of them hurt by 15-55 %: mean retention ~0.94. The t bound claims
    # >= 0.95 too often; the skew-corrected one does not.
    from tokenlens.stats import ratio_estimate

    rng = np.random.default_rng(4)
    t_over = skew_over = 0
    runs = 1500
    for _ in range(runs):
        x = np.where(rng.random(20) < 0.171, 1 - rng.uniform(0.15, 0.55, 20), 1.0)
        x = x + rng.normal(0, 0.01, 20)
        t_over += ratio_estimate(x, np.ones(20), confidence=0.9).low >= 0.95  # type: ignore[operator]
        est = ratio_estimate(x, np.ones(20), confidence=0.9, method="skew_t")
        skew_over += est.low >= 0.95  # type: ignore[operator]
    assert t_over / runs > 0.065
    assert skew_over / runs < 0.05

"""The noiseless ceilings a noisy world's power is read against."""

from __future__ import annotations

from tokenlens.simulate_judge import CEILING_TOLERANCE, ceiling


def test_only_the_ceiling_at_the_tolerance_keeps_its_promise_for_an_arm_at_it() -> None:
    """The best threshold set on the 0.94 arm applies an arm at the tolerance more than
    twice as often as 5 %; the one set at the tolerance holds it to 5 % and reaches less."""
    ceil = ceiling(60, 600, seed=3)
    assert ceil.at_tolerance[CEILING_TOLERANCE] <= 0.06
    assert ceil.best[CEILING_TOLERANCE] > 0.08  # 13 % over 4,000
    assert ceil.best[0.94] <= 0.06
    assert ceil.power("best") > ceil.power("at_tolerance") + 0.04
    # the decision's own bound spends at most the 5 % at the tolerance, and nearly
    # reaches the best threshold that does the same
    assert ceil.rule[CEILING_TOLERANCE] <= 0.06
    assert ceil.power("at_tolerance") - 0.08 < ceil.power("rule") <= ceil.power("at_tolerance")

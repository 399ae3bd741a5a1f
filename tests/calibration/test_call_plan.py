"""The spend estimate's wording: a sequential run's plan is a bound, and says so (the
offline run planned 133 answer calls and paid 113, with nothing to tell them apart)."""

from __future__ import annotations

from tokenlens.calibration.estimate import CallPlan


def test_a_fixed_plan_states_its_count_and_a_sequential_plan_a_bound() -> None:
    fixed = CallPlan(133, 0, 0, 0, None).describe()
    sequential = CallPlan(133, 0, 0, 0, None, sequential=True).describe()
    assert fixed.startswith("133 new answer calls (0 answer calls already in the ledger)")
    assert "sequential" not in fixed
    assert sequential.startswith("up to 133 new answer calls (")
    assert sequential.endswith("the sequential design stops paying once the verdicts settle")
    done = CallPlan(133, 133, 0, 0, None, sequential=True).describe()
    assert done.startswith("0 new calls, $0 (")

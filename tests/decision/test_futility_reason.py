"""After a sequential futility stop, the policy says why: the arm's upper bound was already
below the tolerance, not that the class has too few tasks."""

from __future__ import annotations

from tests.decision import test_sequential as seq
from tokenlens.decision import decide
from tokenlens.decision.sequential import Cell, ClassPlan, run_sequential


def test_a_futility_stop_is_reported_as_a_failure_not_as_too_few_tasks() -> None:
    ratio = {"safe": 0.6, "prune@0.8": 1.0, "prune@0.6": 1.0, "select@0.4": 1.0}
    log: list[Cell] = []
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(20)), tuple(seq.REDUCTIONS))
    result = run_sequential([plan], seq.scripted_oracle(ratio, log))
    assert result.rounds[-1].statuses["x"]["safe"] == "failed"
    assert len({c.task_id for c in log}) == 10  # stopped at the first look, of 20

    entry = decide(result.curve, calibration_id="seq-test", model="m").classes["x"]
    assert entry.arm is None and entry.cause == "no_arm_held", entry
    assert "needs ≥" not in entry.reason and "too few" not in entry.reason, entry.reason
    assert "gentlest arm safe" in entry.reason
    assert "below the 95.0% tolerance" in entry.reason and "10 tasks" in entry.reason

"""Sequential calibration: alpha spending, the round schedule, and the oracle-driven loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import decide
from tokenlens.decision.sequential import (
    Cell,
    ClassPlan,
    SequentialSettings,
    look_alphas,
    run_sequential,
    schedule,
)
from tokenlens.decision.spending import nominal_alphas, obrien_fleming_spent
from tokenlens.simulate import DEFAULT_SCENARIOS, SimArm
from tokenlens.simulate_sequential import compare
from tokenlens.stats import Spread


def test_one_look_spends_all_and_obrien_fleming_keeps_most_for_the_last() -> None:
    assert nominal_alphas([1.0], 0.05) == [pytest.approx(0.05)]
    early, late = nominal_alphas([0.5, 1.0], 0.05, obrien_fleming_spent)
    assert early == pytest.approx(0.0056, abs=3e-4)  # textbook OBF boundary z = 2.54
    assert late == pytest.approx(0.048, abs=1e-3)
    early, late = nominal_alphas([0.5, 1.0], 0.05)  # the default: power family, rho 1.5
    assert 0.0056 < early < 0.05 * 0.5**1.5 + 1e-9 and late < 0.05


def test_the_spent_error_over_correlated_looks_is_at_most_alpha() -> None:
    fractions = np.array([0.3, 0.55, 0.8, 1.0])
    alphas = nominal_alphas(list(fractions), 0.05)
    from scipy.stats import norm

    bounds = norm.ppf(1 - np.array(alphas))
    rng = np.random.default_rng(0)
    increments = rng.normal(size=(200_000, 4)) * np.sqrt(np.diff(fractions, prepend=0.0))
    z = np.cumsum(increments, axis=1) / np.sqrt(fractions)  # Brownian motion at each look
    crossed = (z >= bounds).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.003)


def test_schedule_adds_tasks_first_then_repeats() -> None:
    assert schedule(20, 20, 10, 3) == [(10, 1), (20, 1), (20, 2), (20, 3)]
    assert schedule(40, 20, 10, 3) == [(10, 1), (20, 1), (40, 1), (40, 2), (40, 3)]
    assert schedule(6, 20, 10, 2) == [(6, 1), (6, 2)]


def test_looks_below_the_evidence_rule_spend_nothing() -> None:
    alphas = look_alphas([(10, 1), (20, 1), (20, 2), (20, 3)], 20, 0.05, Spread(0.03, 0.06))
    assert alphas[0] == 0.0
    assert 0 < alphas[1] < alphas[2] < alphas[3] <= 0.05


# --------------------------------------------------------------------------- the loop

REDUCTIONS = {"safe": 0.02, "prune@0.8": 0.12, "prune@0.6": 0.25, "select@0.4": 0.4}


def scripted_oracle(
    ratio: dict[str, float], log: list[Cell], noise: dict[str, float] | None = None
):
    """Deterministic grades: comp = ratio * clear with a per-cell wobble (0.6 points, or
    `noise[arm]`)."""

    def oracle(cells: Sequence[Cell]) -> pd.DataFrame:
        log.extend(cells)
        rows = []
        for c in cells:
            t = int(c.task_id.split("-")[1])
            clear = 80 + (t % 5)
            scale = (noise or {}).get(c.arm, 0.6)
            wobble = (((t * 7 + c.replicate * 3 + len(c.arm)) % 5) - 2) * scale
            comp = clear + wobble if c.arm == CONTROL else ratio[c.arm] * clear + wobble
            parsed = None if c.arm == CONTROL else Arm.parse(c.arm)
            rows.append(
                {
                    "task_id": c.task_id,
                    "task_class": c.task_class,
                    "arm": c.arm,
                    "method": CONTROL if parsed is None else parsed.method,
                    "rate": None if parsed is None else parsed.rate,
                    "replicate": c.replicate,
                    "judge": "metric",
                    "grade_clear": float(clear),
                    "grade_comp": float(min(max(comp, 0), 100)),
                    "reduction": 0.0 if parsed is None else REDUCTIONS[c.arm],
                    "error": None,
                }
            )
        return pd.DataFrame(rows)

    return oracle


def test_clear_arms_stop_early_beyond_the_failure_is_never_sampled() -> None:
    # safe: lossless; prune@0.8: borderline; prune@0.6: clearly harmful; select: beyond it.
    ratio = {"safe": 1.0, "prune@0.8": 0.965, "prune@0.6": 0.6, "select@0.4": 1.0}
    log: list[Cell] = []
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(40)), tuple(REDUCTIONS))
    result = run_sequential([plan], scripted_oracle(ratio, log, {"prune@0.8": 6.0}))

    def tasks_of(arm: str) -> int:
        return len({c.task_id for c in log if c.arm == arm})

    def pairs_of(arm: str) -> int:
        return sum(c.arm == arm for c in log)

    # Beyond a settled failure: never paid for (the fixed design pays 120 pairs for it).
    assert pairs_of("select@0.4") == 0
    assert tasks_of("prune@0.6") == 10  # failed at the first look
    assert pairs_of("safe") < pairs_of("prune@0.8")  # the clear arm stopped first
    assert tasks_of("prune@0.8") > tasks_of("prune@0.6")  # the borderline one got more tasks
    statuses = result.rounds[-1].statuses["x"]
    assert statuses == {
        "safe": "held",
        "prune@0.8": statuses["prune@0.8"],
        "prune@0.6": "failed",
        "select@0.4": "skipped",
    }
    policy = decide(result.curve, calibration_id="seq-test", model="m")
    assert policy.classes["x"].arm is not None
    assert policy.classes["x"].arm.key in ("safe", "prune@0.8")
    assert len(log) == len(set(log))  # no cell asked twice


def test_the_same_oracle_gives_the_same_policy() -> None:
    ratio = {"safe": 1.0, "prune@0.8": 0.98, "prune@0.6": 0.7, "select@0.4": 1.0}
    plan = ClassPlan("x", tuple(f"x-{i:02d}" for i in range(20)), tuple(REDUCTIONS))
    one = run_sequential([plan], scripted_oracle(ratio, []))
    two = run_sequential([plan], scripted_oracle(ratio, []))
    assert one.curve.table.equals(two.curve.table) and one.cells == two.cells


def test_sequential_pays_less_than_fixed_on_a_lossless_arm() -> None:
    world = replace(
        DEFAULT_SCENARIOS[1],
        name="lossless",
        n_tasks=20,
        replicates=3,
        arms=(SimArm("prune@0.6", 1.0, 0.3),),
    )
    fixed, seq = compare(world, runs=6, seed=5)
    assert seq.mean_calls < 0.8 * fixed.mean_calls
    assert seq.power >= fixed.power - 0.34  # same decisions within 6-run noise


def test_settings_are_validated_by_aggregate() -> None:
    plan = ClassPlan("x", ("x-00", "x-01"), ("safe",))
    with pytest.raises(ValueError, match="mode must be one of"):
        run_sequential(
            [plan],
            scripted_oracle({"safe": 1.0}, []),
            SequentialSettings(mode="intervals"),  # type: ignore[arg-type]
        )

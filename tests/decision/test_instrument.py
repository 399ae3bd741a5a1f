"""The instrument's rules (issue: never certify concentrated harm): evidence, floors,
readable numbers, the defects each fixed with a test, the seed's worked example, the planner."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.grade_tables import cell, frame, jittered, uniform
from tokenlens.decision import aggregate, decide, tasks_for_measured, tasks_for_provisional
from tokenlens.decision.planner import detectable_retention, plan_arm
from tokenlens.errors import TokenLensError
from tokenlens.simulate import DEFAULT_SCENARIOS, designs, run_study
from tokenlens.stats import Spread, spread, tasks_for_power


def _decide(grades: pd.DataFrame, *, tolerance: float = 0.95, mode: str = "interval"):
    curve = aggregate(grades, tolerance=tolerance, mode=mode)  # type: ignore[arg-type]
    return curve, decide(curve, calibration_id="instrument-test", model="m")


def _row(curve, task_class: str, arm: str) -> pd.Series:
    t = curve.table
    return t[(t["task_class"] == task_class) & (t["arm"] == arm)].iloc[0]


# --------------------------------------------------------------------------- defects


def test_an_unknown_mode_is_an_error_not_the_mean_rule() -> None:
    grades = frame(cell("x", "control", uniform(90, 90)), cell("x", "safe", uniform(90, 90)))
    with pytest.raises(ValueError, match="mode must be one of interval, mean; got 'intervals'"):
        aggregate(grades, tolerance=0.95, mode="intervals")  # type: ignore[arg-type]


def test_aggregate_refuses_arm_names_decide_could_not_publish() -> None:
    rows = cell("x", "safe", uniform(90, 90))
    for r in rows:
        r["arm"] = "shrink-it"
    grades = frame(cell("x", "control", uniform(90, 90)), rows)
    with pytest.raises(TokenLensError, match="'shrink-it' are not arms"):
        aggregate(grades, tolerance=0.95)


def test_a_tie_on_reduction_is_resolved_by_the_walk_itself() -> None:
    # Two held arms save exactly as much: the policy names the arm the walk chose.
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=20)),
        cell("x", "prune@0.6", jittered(90, 1.0, tasks=20, spread=0.3), reduction=0.2),
        cell("x", "select@0.6", jittered(90, 1.0, tasks=20, spread=0.3), reduction=0.2),
    )
    curve, policy = _decide(grades)
    chosen = curve.table[curve.table["chosen"].astype(bool) & (curve.table["task_class"] == "x")]
    assert len(chosen) == 1
    assert policy.classes["x"].arm is not None
    assert policy.classes["x"].arm.key == chosen.iloc[0]["arm"]


def test_an_arm_whose_pairs_all_errored_is_not_measured_and_does_not_stop_the_walk() -> None:
    broken = [[(None, None)] * 3 for _ in range(20)]
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=20)),
        cell("x", "safe", broken, reduction=0.05),
        cell("x", "prune@0.6", jittered(90, 1.0, tasks=20, spread=0.3), reduction=0.2),
    )
    curve, policy = _decide(grades)
    assert _row(curve, "x", "safe")["status"] == "not_measured"
    assert _row(curve, "x", "prune@0.6")["status"] == "held"
    entry = policy.classes["x"]
    assert entry.arm is not None and entry.arm.key == "prune@0.6"
    assert "not measured" in entry.reason and "safe" in entry.reason


def test_a_floor_at_or_above_the_tolerance_refuses_instead_of_a_negative_bar() -> None:
    # A 10 % tolerance (retention >= 10 %) with a 12 % floor: the bar would be -2 %.
    grades = frame(
        cell("x", "control", jittered(95, 0.88, tasks=20, spread=0.3)),
        cell("x", "prune@0.2", uniform(100, 5, tasks=20), reduction=0.8),
    )
    for mode in ("interval", "mean"):
        _, policy = _decide(grades, tolerance=0.10, mode=mode)
        entry = policy.classes["x"]
        assert entry.verdict == "none" and entry.cause == "unmeasurable", mode
        assert "bar (tolerance − floor) would be 0 or negative" in entry.reason


def test_a_one_task_class_says_it_needs_more_tasks() -> None:
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=1)),
        cell("x", "safe", uniform(90, 90, tasks=1), reduction=0.05),
    )
    _, policy = _decide(grades)
    entry = policy.classes["x"]
    assert entry.cause == "too_few_tasks"
    assert entry.reason.startswith("needs ≥ 20 tasks for a 95.0% tolerance, has 1")


# --------------------------------------------------------------------------- evidence, floor


def test_minimum_evidence_follows_the_tolerance() -> None:
    assert tasks_for_provisional(0.95) == 20 and tasks_for_measured(0.95) == 60
    assert tasks_for_provisional(0.90) == 10 and tasks_for_measured(0.90) == 30
    assert tasks_for_provisional(0.99) == 100


def test_the_floor_refuses_a_class_only_when_its_interval_is_above_ten_percent() -> None:
    # Control retention scattered around 0.89: a ~11 % floor whose interval reaches 10 %.
    per_task = [[(100, c)] * 3 for c in (100, 70, 95, 80, 100, 85) * 4]
    grades = frame(
        cell("x", "control", per_task),
        cell("x", "safe", uniform(100, 100, tasks=24), reduction=0.05),
    )
    curve, interval_policy = _decide(grades)
    ctrl = _row(curve, "x", "control")
    assert ctrl["noise_floor"] > 0.10 and ctrl["noise_floor_low"] <= 0.10
    assert interval_policy.classes["x"].cause != "unmeasurable"
    _, mean_policy = _decide(grades, mode="mean")
    assert mean_policy.classes["x"].cause == "unmeasurable"  # the seed's rule, by the point


def test_a_clearly_noisy_floor_is_still_refused_in_interval_mode() -> None:
    grades = frame(
        cell("x", "control", jittered(95, 0.80, tasks=20, spread=0.5)),
        cell("x", "safe", uniform(100, 100, tasks=20), reduction=0.05),
    )
    _, policy = _decide(grades)
    assert policy.classes["x"].cause == "unmeasurable"
    assert "wholly above the 10%" in policy.classes["x"].reason


# --------------------------------------------------------------------------- readable numbers


def test_retentions_in_the_curve_are_capped_into_zero_to_one() -> None:
    # Tiny cleartext grades make wild ratios: the table still reads 0-100 %.
    wild = [[(2, 90), (3, 1), (1, 60)] for _ in range(20)]
    grades = frame(
        cell("x", "control", uniform(3, 3, tasks=20)),
        cell("x", "prune@0.6", wild, reduction=0.3),
    )
    curve, _ = _decide(grades)
    for column in ("retention_mean", "retention", "retention_low", "retention_high"):
        values = curve.table[column].dropna()
        assert ((values >= 0.0) & (values <= 1.0)).all(), column


def test_pairs_with_a_zero_cleartext_grade_are_excluded_and_counted() -> None:
    pairs = [[(0, 80), (90, 90), (90, 90)] for _ in range(20)]
    grades = frame(
        cell("x", "control", uniform(90, 90, tasks=20)), cell("x", "safe", pairs, reduction=0.05)
    )
    curve, _ = _decide(grades)
    r = _row(curve, "x", "safe")
    assert r["n_broken"] == 20 and r["n_pairs"] == 40
    assert r["retention"] == pytest.approx(1.0)


# --------------------------------------------------------------------------- the seed's example


def _seed_world() -> pd.DataFrame:
    """The seed article's run: 3 repeats, a 99 % tolerance, llmlingua2 at keep-rate 0.8
    (0.6 on code-context), controls reading 100 / 94.7 / 97.5 / 89 / 84 %."""

    def arm(task_class: str, key: str, comp: float, reduction: float) -> list[dict]:
        return cell(task_class, key, uniform(100, comp, tasks=2), reduction=reduction)

    def control(task_class: str, second: float) -> list[dict]:
        return cell(task_class, "control", uniform(100, second, tasks=2))

    return frame(
        control("extraction", 100),
        arm("extraction", "llmlingua2@0.8", 99.8, 0.149),
        control("code-context", 100),
        arm("code-context", "llmlingua2@0.6", 100, 0.029),
        control("numeric-reasoning", 94.7),
        arm("numeric-reasoning", "llmlingua2@0.8", 96.8, 0.14),
        control("instruction-following", 97.5),
        arm("instruction-following", "llmlingua2@0.8", 99.0, 0.153),
        control("long-doc-qa", 89),
        arm("long-doc-qa", "llmlingua2@0.8", 95, 0.15),
        control("summarization", 84),
        arm("summarization", "llmlingua2@0.8", 86.4, 0.15),
        control("chat-history", 100),
        arm("chat-history", "llmlingua2@0.8", 90, 0.15),
    )


def test_the_seed_articles_worked_example_in_mean_mode() -> None:
    _, policy = _decide(_seed_world(), tolerance=0.99, mode="mean")
    verdicts = {name: (e.mark, e.arm.key if e.arm else None) for name, e in policy.classes.items()}
    assert verdicts == {
        "extraction": ("✓", "llmlingua2@0.8"),
        "code-context": ("✓", "llmlingua2@0.6"),
        "numeric-reasoning": ("?", "llmlingua2@0.8"),
        "instruction-following": ("?", "llmlingua2@0.8"),
        "long-doc-qa": ("—", None),
        "summarization": ("—", None),
        "chat-history": ("—", None),
    }
    c = policy.classes
    assert c["extraction"].retention_mean == pytest.approx(0.998)
    assert "inside the 5.3% noise floor" in c["numeric-reasoning"].reason
    assert "inside the 2.5% noise floor" in c["instruction-following"].reason
    assert "control lost 11.0%" in c["long-doc-qa"].reason
    assert "control lost 16.0%" in c["summarization"].reason
    assert c["chat-history"].cause == "no_arm_held"


def test_the_seed_example_certifies_nothing_in_interval_mode_with_two_tasks() -> None:
    _, policy = _decide(_seed_world(), tolerance=0.99)
    assert {e.verdict for e in policy.classes.values()} == {"none"}
    assert "needs ≥ 100 tasks" in policy.classes["extraction"].reason


# --------------------------------------------------------------------------- planner


def test_spread_splits_between_and_within_task_variation() -> None:
    rng = np.random.default_rng(3)
    tasks, reps = 400, 4
    task_effect = np.repeat(rng.normal(0, 0.05, tasks), reps)
    noise = rng.normal(0, 0.10, tasks * reps)
    reference = np.full(tasks * reps, 80.0)
    comp = reference * (1 + task_effect + noise)
    sp = spread(comp, reference, np.repeat(np.arange(tasks), reps), ratio=1.0)
    assert sp is not None and sp.within is not None
    assert sp.between == pytest.approx(0.05, abs=0.01)
    assert sp.within == pytest.approx(0.10, abs=0.01)


def test_tasks_for_power_grows_as_the_margin_shrinks_and_repeats_help_within_noise() -> None:
    sp = Spread(between=0.02, within=0.08)
    wide, narrow = tasks_for_power(0.04, sp, 3), tasks_for_power(0.01, sp, 3)
    assert wide is not None and narrow is not None and narrow > 3 * wide
    one, three = tasks_for_power(0.02, sp, 1), tasks_for_power(0.02, sp, 3)
    assert one is not None and three is not None and three < one
    assert tasks_for_power(0.0, sp, 3) is None


def test_the_planner_never_plans_below_the_evidence_rule_and_refuses_losing_arms() -> None:
    kwargs = dict(tolerance=0.95, n_arms=3, prompt_tokens=1000, model="claude-haiku-4-5")
    easy = plan_arm(
        "x", "safe", retention=1.0, spread=Spread(0.001, 0.001), judge_model=None, **kwargs
    )
    assert all(d.tasks == 20 and d.tasks_measured == 60 for d in easy.designs)
    assert all(
        d.cost_usd is not None and d.cost_batch_usd == pytest.approx(d.cost_usd / 2)
        for d in easy.designs
    )
    losing = plan_arm(
        "x", "prune@0.4", retention=0.93, spread=Spread(0.03, 0.05), judge_model=None, **kwargs
    )
    assert all(d.tasks is None for d in losing.designs)
    assert "no design certifies it" in losing.note


def test_a_small_design_can_certify_nothing_and_says_so() -> None:
    assert detectable_retention(0.95, tasks=5, repeats=3) is None
    reachable = detectable_retention(0.95, tasks=40, repeats=3)
    assert reachable is not None and 0.95 < reachable < 1.0


# --------------------------------------------------------------------------- simulation


def test_concentrated_harm_one_point_below_tolerance_is_rarely_applied() -> None:
    worlds = designs(DEFAULT_SCENARIOS[:1], tasks=(5, 40), repeats=(3,))
    result = run_study(worlds, runs=40, seed=11, modes=("interval",))
    small, large = result.tallies
    assert small.false_held == 0  # 5 tasks: nothing may be applied at all
    assert large.false_held_rate <= 0.15  # goal 5 %; 40 runs is a coarse sample
    assert large.power > 0.5

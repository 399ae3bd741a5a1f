"""The decision rules, each on a grades table whose numbers are chosen by hand."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from tests.grade_tables import cell, frame, jittered, realistic, uniform
from tokenlens.compress.arms import Arm
from tokenlens.decision import (
    ALL_CLASSES,
    EXIT_OK,
    EXIT_UNRESOLVED,
    Rung,
    aggregate,
    decide,
    exit_code,
    judge_agreement,
    walk_ladder,
)
from tokenlens.errors import JudgeError
from tokenlens.identity import calibration_id
from tokenlens.policy import load_policy, write_policy
from tokenlens.tables import CURVE
from tokenlens.tasks import CalibrationTask


def policy_for(grades: pd.DataFrame, *, tolerance: float = 0.95, mode: str = "mean", **kw):
    curve = aggregate(grades, tolerance=tolerance, mode=mode)  # type: ignore[arg-type]
    return curve, decide(curve, calibration_id="test-calibration", model="m", **kw)


def row(curve, task_class: str, arm: str) -> pd.Series:
    t = curve.table
    return t[(t["task_class"] == task_class) & (t["arm"] == arm)].iloc[0]


# --------------------------------------------------------------------------- retention


def test_capped_mean_gives_no_credit_for_better_compressed_answers() -> None:
    # Half the pairs +20 %, half -20 %: uncapped mean 1.0, capped 0.9.
    pairs = [[(80, 96), (80, 64)] for _ in range(4)]
    grades = frame(
        cell("x", "control", uniform(80, 80, tasks=4, reps=2)), cell("x", "prune@0.6", pairs)
    )
    curve, policy = policy_for(grades, tolerance=0.95)
    r = row(curve, "x", "prune@0.6")
    assert r["retention_mean"] == pytest.approx(0.9)
    assert r["retention"] == pytest.approx(1.0)  # pooled: +20 % and -20 % cancel, capped at 1
    assert policy.classes["x"].verdict == "none"
    assert policy.classes["x"].cause == "no_arm_held"


def test_zero_cleartext_grade_is_broken_and_reported_not_counted_as_full_retention() -> None:
    pairs = [[(0, 50), (80, 40)] for _ in range(3)]
    grades = frame(cell("x", "control", uniform(80, 80, tasks=3, reps=2)), cell("x", "safe", pairs))
    curve, _ = policy_for(grades)
    r = row(curve, "x", "safe")
    assert r["n_broken"] == 3
    assert r["n_pairs"] == 3
    assert r["retention_mean"] == pytest.approx(0.5)


def test_error_rows_are_counted_never_scored_as_zero() -> None:
    good = uniform(80, 80, tasks=4, reps=2)
    bad = [[(None, None)] for _ in range(4)]
    grades = frame(
        cell("x", "control", good),
        cell("x", "safe", good, reduction=0.1),
        cell("x", "safe", bad, reduction=0.1, task_prefix="x"),
    )
    curve, _ = policy_for(grades)
    r = row(curve, "x", "safe")
    assert r["n_errors"] == 4
    assert r["retention_mean"] == pytest.approx(1.0)


def test_an_out_of_range_grade_in_the_table_is_refused() -> None:
    grades = frame(cell("x", "control", uniform(80, 80)), cell("x", "safe", uniform(80, 130)))
    with pytest.raises(JudgeError, match="outside 0-100"):
        aggregate(grades, tolerance=0.95)


# --------------------------------------------------------------------------- floor and bar


def test_control_arm_sets_the_noise_floor_and_the_bar() -> None:
    grades = frame(cell("x", "control", uniform(100, 95)), cell("x", "safe", uniform(100, 95)))
    curve, policy = policy_for(grades, tolerance=0.99)
    ctrl = row(curve, "x", "control")
    assert ctrl["noise_floor"] == pytest.approx(0.05)
    assert ctrl["bar"] == pytest.approx(0.94)
    entry = policy.classes["x"]
    assert entry.noise_floor == pytest.approx(0.05) and entry.bar == pytest.approx(0.94)


def test_bar_moves_by_the_floor_per_class() -> None:
    # Same arm retention 0.96 on two classes; only the noisy class lowers its bar below it.
    grades = frame(
        cell("noisy", "control", uniform(100, 95)),
        cell("noisy", "prune@0.8", uniform(100, 96)),
        cell("steady", "control", uniform(100, 100)),
        cell("steady", "prune@0.8", uniform(100, 96)),
    )
    _, policy = policy_for(grades, tolerance=0.99)
    assert policy.classes["noisy"].verdict == "provisional"
    assert policy.classes["noisy"].reason.startswith(
        "provisional — the harness could not detect harm because the loss sits inside the "
        "5.0% noise floor"
    )
    assert policy.classes["steady"].verdict == "none"
    assert policy.classes["steady"].cause == "no_arm_held"


def test_a_floor_wider_than_the_tolerance_cannot_vouch_for_a_check_mark() -> None:
    # The arm loses nothing, but the instrument wobbles 5 % against a 1 % tolerance.
    wide = frame(cell("x", "control", uniform(100, 95)), cell("x", "safe", uniform(100, 100)))
    narrow = frame(cell("x", "control", uniform(100, 99.5)), cell("x", "safe", uniform(100, 100)))
    assert policy_for(wide, tolerance=0.99)[1].classes["x"].verdict == "provisional"
    assert policy_for(narrow, tolerance=0.99)[1].classes["x"].verdict == "measured"


@pytest.mark.parametrize(
    ("control_comp", "unmeasurable"), [(85, True), (89.9, True), (90.5, False)]
)
def test_a_control_losing_more_than_ten_percent_is_unmeasurable(control_comp, unmeasurable) -> None:
    grades = frame(
        cell("summarization", "control", uniform(100, control_comp)),
        cell("summarization", "llmlingua2@0.8", uniform(100, 100)),
    )
    _, policy = policy_for(grades, tolerance=0.95)
    entry = policy.classes["summarization"]
    if unmeasurable:
        assert entry.verdict == "none" and entry.cause == "unmeasurable"
        assert "control lost" in entry.reason
        assert entry.arm is None
    else:
        assert entry.verdict != "none"


def test_missing_control_is_unmeasurable() -> None:
    _, policy = policy_for(frame(cell("x", "safe", uniform(100, 100))))
    assert policy.classes["x"].cause == "unmeasurable"
    assert "noise floor is unknown" in policy.classes["x"].reason


# --------------------------------------------------------------------------- the walk


def test_walk_stops_at_first_failure_and_ignores_later_passes() -> None:
    walk = walk_ladder(
        [
            Rung("prune@0.4", 0.5, True),
            Rung("prune@0.8", 0.1, True),
            Rung("prune@0.6", 0.3, False),
            Rung("llmlingua2@0.4", 0.6, False),
            Rung("safe", 0.0, False),
        ]
    )
    assert walk.chosen == "prune@0.8"
    assert walk.first_failure == "prune@0.6"
    assert walk.ignored == ("prune@0.4",)
    assert walk.statuses == {
        "prune@0.8": "held",
        "prune@0.6": "failed",
        "prune@0.4": "ignored",
        "llmlingua2@0.4": "not_reached",
        "safe": "no_savings",
    }


def test_policy_never_chooses_an_arm_that_passes_after_a_failure() -> None:
    grades = frame(
        cell("x", "control", uniform(100, 100)),
        cell("x", "prune@0.8", uniform(100, 99), reduction=0.10),
        cell("x", "prune@0.6", uniform(100, 80), reduction=0.25),
        cell("x", "prune@0.4", uniform(100, 99), reduction=0.45),
    )
    curve, policy = policy_for(grades, tolerance=0.95)
    entry = policy.classes["x"]
    assert (entry.method, entry.rate) == ("prune", 0.8)
    assert entry.ignored_arms == ("prune@0.4",)
    assert "ignored after the first failure: prune r=0.4" in entry.reason
    assert row(curve, "x", "prune@0.4")["status"] == "ignored"


def test_gentlest_means_least_measured_reduction_not_ladder_position() -> None:
    grades = frame(
        cell("x", "control", uniform(100, 100)),
        cell("x", "safe", uniform(100, 80), reduction=0.30),  # nominally gentlest, saves most
        cell("x", "prune@0.8", uniform(100, 99), reduction=0.05),
    )
    _, policy = policy_for(grades)
    assert policy.classes["x"].arm == Arm("prune", 0.8)


def test_nothing_compressible_is_none_with_that_reason_and_does_not_fail_the_run() -> None:
    grades = frame(
        cell("code-context", "control", uniform(100, 100)),
        cell("code-context", "safe", uniform(100, 100), reduction=0.0),
        cell("code-context", "minify", uniform(100, 100), reduction=0.001),
    )
    _, policy = policy_for(grades)
    entry = policy.classes["code-context"]
    assert entry.verdict == "none" and entry.cause == "nothing_compressible"
    assert "nothing was compressible" in entry.reason
    assert exit_code(policy, ["code-context"]) == EXIT_OK


# --------------------------------------------------------------------------- ✓ / ? / —


def test_measured_provisional_and_none_in_interval_mode() -> None:
    # ✓ needs 60 tasks at a 95 % tolerance; 20 tasks allow at most a ?.
    grades = frame(
        cell("extraction", "control", uniform(90, 90, tasks=60)),
        cell(
            "extraction", "llmlingua2@0.8", jittered(90, 1.0, tasks=60, spread=0.3), reduction=0.15
        ),
        cell("numeric", "control", uniform(90, 90, tasks=20)),
        cell("numeric", "llmlingua2@0.8", jittered(90, 0.99, tasks=20, spread=0.3), reduction=0.14),
        cell("noisy", "control", jittered(90, 0.93, tasks=60, spread=0.3)),
        cell("noisy", "llmlingua2@0.8", jittered(90, 0.99, tasks=60, spread=0.3), reduction=0.14),
        cell("chat", "control", uniform(90, 90, tasks=60)),
        cell("chat", "llmlingua2@0.8", jittered(90, 0.80, tasks=60, spread=0.3), reduction=0.14),
    )
    _, policy = policy_for(grades, tolerance=0.95, mode="interval")
    assert policy.classes["extraction"].verdict == "measured"
    assert policy.classes["extraction"].mark == "✓"
    numeric = policy.classes["numeric"]
    assert numeric.verdict == "provisional" and numeric.mark == "?"
    assert "needs ≥ 60 tasks for a ✓" in numeric.reason
    noisy = policy.classes["noisy"]
    assert noisy.verdict == "provisional" and "inside the 7.0% noise floor" in noisy.reason
    assert policy.classes["chat"].verdict == "none"
    assert policy.classes["chat"].mark == "—"
    for entry in policy.classes.values():
        assert entry.reason


def test_interval_mode_needs_the_interval_not_just_the_mean() -> None:
    # Per-task retention 1, 1, .9, 1, .92: mean .964 clears .95; 5 tasks cannot pin it down.
    noisy = [[(100, comp)] * 3 for comp in (100, 100, 90, 100, 92)]
    grades = frame(cell("x", "control", uniform(100, 100)), cell("x", "prune@0.6", noisy))
    _, mean_policy = policy_for(grades, tolerance=0.95, mode="mean")
    int_curve, int_policy = policy_for(grades, tolerance=0.95, mode="interval")
    r = row(int_curve, "x", "prune@0.6")
    assert r["retention_mean"] >= r["bar"]  # the mean clears the bar ...
    assert r["retention_low"] < 0.95  # ... the interval does not
    assert mean_policy.classes["x"].verdict != "none"
    assert int_policy.classes["x"].verdict == "none"
    assert int_policy.classes["x"].cause == "too_few_tasks"  # and 5 tasks are too few anyway
    assert int_policy.mode == "interval" and mean_policy.mode == "mean"


def test_default_entry_pools_every_class() -> None:
    grades = frame(
        cell("a", "control", uniform(100, 100)),
        cell("a", "prune@0.8", uniform(100, 99)),
        cell("b", "control", uniform(100, 100)),
        cell("b", "prune@0.8", uniform(100, 99)),
    )
    curve, policy = policy_for(grades)
    assert policy.default.task_class == "default"
    assert policy.default.n_tasks == 10
    assert ALL_CLASSES in set(curve.table["task_class"])
    assert ALL_CLASSES not in policy.classes


# --------------------------------------------------------------------------- exit code


def test_exit_code_is_non_zero_on_realistic_data_with_an_unmeasurable_class() -> None:
    grades = realistic()
    curve = aggregate(grades, tolerance=0.95, mode="interval")
    classes = sorted(set(grades["task_class"]))
    policy = decide(curve, calibration_id="realistic-run", model="m", requested_classes=classes)
    summ = policy.classes["summarization"]
    assert summ.cause == "unmeasurable"
    assert summ.noise_floor is not None and summ.noise_floor > 0.10
    assert policy.classes["chat-history"].cause == "no_arm_held"
    assert policy.classes["extraction"].verdict == "measured"
    assert exit_code(policy, classes) == EXIT_UNRESOLVED
    assert exit_code(policy, ["extraction", "code-context"]) == EXIT_OK


def test_a_requested_class_without_data_fails_the_run() -> None:
    grades = frame(cell("a", "control", uniform(100, 100)), cell("a", "safe", uniform(100, 100)))
    _, policy = policy_for(grades, requested_classes=["a", "ghost"])
    assert policy.classes["ghost"].cause == "unmeasurable"
    assert exit_code(policy, ["a", "ghost"]) == EXIT_UNRESOLVED


# --------------------------------------------------------------------------- noise split


def test_rejudged_control_pairs_split_the_floor() -> None:
    first = jittered(90, 0.96, spread=4.0)
    second = [
        [(c, comp + (1.5 if (i + r) % 2 else -1.5)) for r, (c, comp) in enumerate(reps)]
        for i, reps in enumerate(first)
    ]
    grades = frame(
        cell("x", "control", first),
        cell("x", "control", second, judge_pass=1),
        cell("x", "safe", uniform(90, 90)),
    )
    curve, policy = policy_for(grades)
    entry = policy.classes["x"]
    assert entry.floor_judge is not None and entry.floor_sampling is not None
    assert entry.floor_judge > 0 and entry.floor_sampling > 0
    assert entry.floor_judge + entry.floor_sampling == pytest.approx(entry.noise_floor)
    # The re-judgement does not count as extra pairs.
    assert row(curve, "x", "control")["n_pairs"] == 15


# --------------------------------------------------------------------------- judges


def test_several_judges_need_a_deciding_one_and_agreement_is_reported() -> None:
    base = [cell("a", "control", uniform(90, 90)), cell("a", "safe", jittered(90, 0.99))]
    other = [
        cell("a", "control", uniform(90, 90), judge="llm"),
        cell("a", "safe", jittered(90, 0.80), judge="llm"),
    ]
    grades = frame(*base, *other)
    with pytest.raises(JudgeError, match="say which one decides"):
        aggregate(grades, tolerance=0.95)
    assert aggregate(grades, tolerance=0.95, judge="llm").judge == "llm"
    agreement = judge_agreement(grades, judges=("metric", "llm"), tolerance=0.95, mode="mean")
    assert agreement.n_pairs == 15
    assert agreement.spearman_retention > 0.5  # same ordering of pairs, shifted levels
    assert agreement.pair_disagreement == pytest.approx(1.0)
    assert agreement.cell_disagreement == pytest.approx(1.0)
    assert agreement.disagreements == (("a", "safe", True, False),)


# --------------------------------------------------------------------------- outputs


def test_curve_matches_its_arrow_schema() -> None:
    curve = aggregate(realistic(), tolerance=0.95)
    table = curve.to_arrow()
    assert table.schema.equals(CURVE)
    assert isinstance(table, pa.Table) and table.num_rows == len(curve.table)


def test_policy_round_trips_through_the_atomic_writer(tmp_path) -> None:
    curve = aggregate(realistic(), tolerance=0.95)
    policy = decide(curve, calibration_id="abcdef0123456789", model="m")
    path = write_policy(policy, tmp_path)
    assert path.name == "abcdef0123456789.json"
    assert load_policy(path) == policy == load_policy(tmp_path / "latest.json")
    entry = policy.classes["extraction"]
    assert entry.retention_interval is not None
    assert 0.0 <= entry.retention_interval.low <= entry.retention_interval.high <= 1.0


def test_calibration_id_is_stable_and_sensitive() -> None:
    tasks = [
        CalibrationTask(
            id=f"t{i}", task_class="extraction", question="q?", context="c", reference="r"
        )
        for i in range(3)
    ]
    args = {
        "arms": [Arm("prune", 0.6), "safe"],
        "models": {"answer": "m", "judge": "metric"},
        "settings": {"repeats": 3, "tolerance": 0.95},
    }
    one = calibration_id(tasks=tasks, **args)
    assert len(one) == 16 and int(one, 16) >= 0
    assert calibration_id(tasks=list(reversed(tasks)), **args) == one
    edited = [tasks[0].model_copy(update={"reference": "R"}), *tasks[1:]]
    assert calibration_id(tasks=edited, **args) != one
    assert (
        calibration_id(tasks=tasks, **{**args, "settings": {"repeats": 5, "tolerance": 0.95}})
        != one
    )
    assert calibration_id(tasks=tasks, **{**args, "arms": ["safe"]}) != one

"""Calibrate what the proxy will do: arms routed by predicted class; policy as applied."""

from __future__ import annotations

import pandas as pd
import pytest

from tokenlens.classifier.classify import classify
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import aggregate, decide
from tokenlens.decision.applied import applied_retention, route_policy
from tokenlens.tasks import DEFAULT_TASKS_PATH, load_tasks

CLASSES = ("extraction", "summarization", "chat-history")
REDUCTION = {"safe": 0.02, "prune@0.8": 0.15, "prune@0.6": 0.3}
#: True retention per class and arm: each class ends on a different arm.
RATIO = {
    "extraction": {"safe": 1.0, "prune@0.8": 1.0, "prune@0.6": 1.0},
    "summarization": {"safe": 1.0, "prune@0.8": 1.0, "prune@0.6": 0.7},
    "chat-history": {"safe": 1.0, "prune@0.8": 0.7, "prune@0.6": 0.6},
}


def _grades(tasks) -> pd.DataFrame:
    rows = []
    for i, task in enumerate(tasks):
        for rep in range(3):
            clear = 80 + (i % 7)
            for arm in (CONTROL, *REDUCTION):
                wobble = (((i * 7 + rep * 3 + len(arm)) % 5) - 2) * 0.5
                ratio = 1.0 if arm == CONTROL else RATIO[task.task_class][arm]
                parsed = None if arm == CONTROL else Arm.parse(arm)
                rows.append(
                    {
                        "task_id": task.id,
                        "task_class": task.task_class,
                        "arm": arm,
                        "method": CONTROL if parsed is None else parsed.method,
                        "rate": None if parsed is None else parsed.rate,
                        "replicate": rep,
                        "judge": "metric",
                        "grade_clear": float(clear),
                        "grade_comp": float(min(100, ratio * clear + wobble)),
                        "reduction": 0.0 if parsed is None else REDUCTION[arm],
                        "error": None,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def routed():
    # the written part of the starter set: a fixed sample, quick as the generated part grows
    written = load_tasks(DEFAULT_TASKS_PATH / "00-written.jsonl")
    tasks = [t for t in written if t.task_class in CLASSES]
    grades = _grades(tasks)
    curve = aggregate(grades, tolerance=0.95)
    policy = decide(curve, calibration_id="routing-test", model="m")
    return tasks, grades, curve, policy, route_policy(policy, curve, tasks)


def test_each_class_chose_a_different_arm_before_routing(routed) -> None:
    _, _, _, policy, _ = routed
    chosen = {name: e.arm.key if e.arm else None for name, e in policy.classes.items()}
    assert chosen == {
        "extraction": "prune@0.6",
        "summarization": "prune@0.8",
        "chat-history": "safe",
    }


def test_a_request_never_receives_an_arm_not_certified_for_its_true_class(routed) -> None:
    tasks, _, curve, _, routing = routed
    policy = routing.policy
    assert routing.how == "classifier (cross-validated)" and policy.classifier is not None
    for task in tasks:  # exactly what the proxy does with this policy
        found = classify(task.to_request(model="m"), None, list(policy.classes), policy.classifier)
        arm = policy.entry_for(found.task_class).arm
        if arm is None:
            continue
        held = curve.rows(task.task_class)
        held_arms = set(held.loc[held["status"] == "held", "arm"])
        assert arm.key in held_arms, (task.id, found.task_class, arm.key)


def test_default_is_an_arm_held_for_every_class_never_the_most_aggressive(routed) -> None:
    _, _, _, _, routing = routed
    default = routing.policy.default
    assert default.arm is not None and default.arm.key == "safe"


def test_policy_as_applied_has_an_interval_per_true_class(routed) -> None:
    _, grades, _, _, routing = routed
    rows = {r.task_class: r for r in applied_retention(grades, routing.policy, routing.labels)}
    assert set(rows) == set(CLASSES)
    for row in rows.values():
        assert row.retention is not None and row.low is not None and row.high is not None
        assert 0.0 <= row.low <= row.retention <= row.high <= 1.0
        assert 0.0 <= row.routed_elsewhere <= 1.0
    assert rows["chat-history"].retention == pytest.approx(1.0, abs=0.02)  # safe is lossless


def test_without_enough_tasks_to_fit_the_rules_are_measured_instead(routed) -> None:
    tasks, _, curve, policy, _ = routed
    few = [t for t in tasks if t.id.endswith(("-01", "-02"))]
    routing = route_policy(policy, curve, few)
    assert routing.how == "rules" and routing.policy.classifier is None


def test_the_report_shows_policy_as_applied_next_to_the_verdicts(routed, tmp_path) -> None:
    from tokenlens.report import write_report

    _, grades, curve, _, routing = routed
    rows = applied_retention(grades, routing.policy, routing.labels)
    paths = write_report(routing.policy, curve, tmp_path, applied=rows)
    for text in (paths.markdown.read_text(), paths.html.read_text()):
        assert "Policy as applied" in text and "retention as applied" in text
        assert "chat-history" in text and "–" in text  # an interval per class


def test_entries_emptied_by_an_unmeasured_class_say_so_rather_than_a_lost_arm(routed) -> None:
    """A class the run could not measure leaves `default` (and any class its requests are
    routed to) without an arm: that is 'could not measure', not 'an arm lost', so the
    publish step carries the last certified entries over (`tokenlens.decision.carryover`)."""
    tasks, grades, _, _, _ = routed
    measured = grades[grades["task_class"] != "chat-history"]
    curve = aggregate(measured, tolerance=0.95)
    policy = decide(curve, calibration_id="routing-test", model="m", requested_classes=CLASSES)
    assert policy.classes["chat-history"].cause == "unmeasurable"
    routed_policy = route_policy(policy, curve, tasks).policy
    default = routed_policy.default
    assert default.arm is None and default.cause == "unmeasurable"
    assert "could not be measured this run: chat-history" in default.reason
    for name, entry in routed_policy.classes.items():
        if entry.arm is None and name != "chat-history":
            assert entry.cause == "unmeasurable" and "chat-history" in entry.reason
    # With every class measured, the default keeps the arm held for all of them.
    assert routed[4].policy.default.arm is not None

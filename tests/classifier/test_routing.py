"""Routing arms to predicted classes: a misrouted request never gets an uncertified arm."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from tokenlens.classifier import fit as fitting
from tokenlens.classifier.classify import classify
from tokenlens.compress.arms import Arm
from tokenlens.policy import Policy, PolicyEntry
from tokenlens.routing import (
    UNSURE,
    arms_by_prediction,
    confusion,
    default_arm,
    merge,
    routed_to,
    safe_arm,
    tally,
)
from tokenlens.tasks import CalibrationTask

SAFE, MINIFY, DEDUP = Arm("safe"), Arm("minify"), Arm("dedup")
P7, P5, P3 = Arm("prune", 0.7), Arm("prune", 0.5), Arm("prune", 0.3)
S5 = Arm("select", 0.5)


def test_tally_counts_abstentions_as_unsure() -> None:
    matrix = tally(["a", "a", "b", "b"], ["a", None, "a", "b"])
    assert matrix == {"a": {"a": 1, UNSURE: 1}, "b": {"a": 1, "b": 1}}
    assert routed_to(matrix, "a") == ["a", "b"]
    assert merge(matrix, {"a": {"b": 2}}) == {
        "a": {"a": 1, UNSURE: 1, "b": 2},
        "b": {"a": 1, "b": 1},
    }
    with pytest.raises(ValueError, match="2 true labels but 1"):
        tally(["a", "b"], ["a"])


def test_confusion_uses_the_labels_the_classifier_gives(
    starter_tasks: list[CalibrationTask],
) -> None:
    tasks = starter_tasks[:10]
    matrix = confusion(
        tasks, lambda ts: [None if i % 2 else t.task_class for i, t in enumerate(ts)]
    )
    assert sum(sum(row.values()) for row in matrix.values()) == 10
    assert sum(row.get(UNSURE, 0) for row in matrix.values()) == 5


def test_calibration_confusion_covers_held_out_and_shipped_labels(
    sample_tasks: list[CalibrationTask],
) -> None:
    tasks = sample_tasks[::2]
    shipped = fitting.fit_bundle(tasks)
    matrix = fitting.calibration_confusion(tasks, shipped)
    # every task counted twice: once cross-validated, once by the shipped bundle
    assert sum(sum(row.values()) for row in matrix.values()) == 2 * len(tasks)
    for task in tasks:
        label = shipped.predict(task.to_request(model="x")).label
        assert matrix[task.task_class].get(label or UNSURE, 0) > 0


def test_safe_arm_is_the_gentlest_chosen_arm_certified_for_all() -> None:
    certified = {"a": [SAFE, MINIFY, P7, P5], "b": [SAFE, MINIFY, P7], "c": [SAFE]}
    chosen = {"a": P5, "b": P7, "c": SAFE}
    assert safe_arm(["a"], certified, chosen) == P5
    assert safe_arm(["a", "b"], certified, chosen) == P7
    assert safe_arm(["a", "b", "c"], certified, chosen) == SAFE


def test_safe_arm_needs_certification_for_every_routed_class() -> None:
    # different ladders: a held prune, b held select; only minify held for both
    certified = {"a": [SAFE, MINIFY, P5], "b": [MINIFY, S5], "n": []}
    chosen: dict[str, Arm | None] = {"a": P5, "b": S5, "n": None}
    assert safe_arm(["a", "b"], certified, chosen) == MINIFY
    assert safe_arm(["a", "n"], certified, chosen) is None  # n has nothing certified
    assert safe_arm(["a", "unknown"], certified, chosen) is None
    assert safe_arm([], certified, chosen) is None
    # an arm certified beyond a class's choice is not offered to it either
    assert safe_arm(["a"], {"a": [SAFE, P7, P5]}, {"a": P7}) == P7
    with pytest.raises(ValueError, match="not among its certified arms"):
        safe_arm(["a"], {"a": [SAFE]}, {"a": P5})


def test_default_is_certified_for_every_class_and_never_the_most_aggressive() -> None:
    certified = {"a": [SAFE, MINIFY, P3], "b": [SAFE, MINIFY, P7, P5], "c": [SAFE, DEDUP]}
    chosen = {"a": P3, "b": P5, "c": DEDUP}
    assert default_arm(certified, chosen) == SAFE
    assert default_arm({"a": [SAFE, MINIFY], "b": [MINIFY]}, {"a": MINIFY, "b": MINIFY}) == MINIFY
    assert default_arm({"a": [SAFE], "b": []}, {"a": SAFE, "b": None}) is None


def test_random_policies_never_route_a_class_to_an_arm_it_was_not_certified_for() -> None:
    ladder = [SAFE, MINIFY, DEDUP, P7, P5, P3, S5]
    rng = random.Random(13)
    for _ in range(300):
        classes = [f"c{i}" for i in range(rng.randint(1, 5))]
        certified = {c: ladder[: rng.randint(0, len(ladder))] for c in classes}
        chosen = {
            c: (rng.choice(arms) if arms and rng.random() < 0.9 else None)
            for c, arms in certified.items()
        }
        certified = {c: arms if chosen[c] is not None else [] for c, arms in certified.items()}
        matrix = {c: {p: rng.randint(0, 2) for p in [*classes, UNSURE]} for c in classes}
        routes = arms_by_prediction(matrix, certified, chosen)
        fallback = default_arm(certified, chosen)
        for true, row in matrix.items():
            allowed = (
                certified[true][: certified[true].index(chosen[true]) + 1] if chosen[true] else []
            )
            for predicted, n in row.items():
                arm = fallback if predicted == UNSURE else routes[predicted]
                if n and arm is not None:
                    assert arm in allowed, (true, predicted, arm, certified, chosen)
            if fallback is not None:
                assert fallback in allowed


def _entry(name: str, arm: Arm | None) -> PolicyEntry:
    return PolicyEntry(
        task_class=name,
        verdict="measured" if arm else "none",
        method=arm.method if arm else "none",
        rate=arm.rate if arm else None,
        reason="test",
    )


def test_a_misrouted_request_never_receives_an_arm_uncertified_for_its_true_class(
    starter_tasks: list[CalibrationTask],
) -> None:
    """Classes got different arms. The classifier is made weak on purpose (fitted on a third
    of the tasks, never unsure) so it misroutes calibration tasks; the policy is routed with
    its confusion on the calibration data; then every calibration task, classified by the
    proxy's own code, gets an arm certified for its *true* class, or none."""
    certified = {
        "extraction": [SAFE, MINIFY, P7, P5, P3],
        "code-context": [SAFE, MINIFY],
        "numeric-reasoning": [SAFE, MINIFY, DEDUP],
        "instruction-following": [],
        "long-doc-qa": [SAFE, MINIFY, P7, P5],
        "summarization": [SAFE, MINIFY, P7, P5, P3, S5],
        "chat-history": [SAFE, MINIFY, P7],
    }
    chosen = {name: (arms[-1] if arms else None) for name, arms in certified.items()}
    assert len(set(chosen.values())) >= 5  # the classes really got different arms
    weak = fitting.fit_bundle(starter_tasks[::3]).model_copy(update={"threshold": 0.0})
    bodies = fitting.task_bodies(starter_tasks)
    matrix = confusion(starter_tasks, lambda ts: [weak.predict(b).label for b in bodies])
    routes = arms_by_prediction(matrix, certified, chosen)
    policy = Policy(
        created=datetime(2026, 11, 1, tzinfo=UTC),
        calibration_id="cal-00000001",
        model="m",
        judge="j",
        tolerance=0.95,
        mode="interval",
        classes={name: _entry(name, arm) for name, arm in routes.items()},
        default=_entry("default", default_arm(certified, chosen)),
        classifier=weak,
    )
    misrouted = 0
    for task, body in zip(starter_tasks, bodies, strict=True):
        found = classify(body, None, policy.classes.keys(), policy.classifier)
        assert found.source == "model"
        misrouted += found.task_class != task.task_class
        arm = policy.entry_for(found.task_class).arm
        if arm is not None:
            assert arm in certified[task.task_class], (task.id, found, arm)
    assert misrouted >= 5, "the test needs misrouted requests to mean anything"
    # and the routing cost something only where it had to: a class nobody else lands in
    # keeps its own arm
    for name, arm in routes.items():
        if routed_to(matrix, name) in ([], [name]):
            assert arm == chosen[name]

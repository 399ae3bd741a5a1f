"""The shipped bundle: numpy inference equals scikit-learn's; JSON round trips; light proxy."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from tokenlens.classifier import fit as fitting
from tokenlens.classifier.bundle import ClassifierBundle, load_bundle
from tokenlens.errors import PolicyError
from tokenlens.policy import Policy, PolicyEntry, load_policy, write_policy
from tokenlens.tasks import CalibrationTask


def _unseen_bodies() -> list[dict[str, object]]:
    """Bodies no task file holds: live-traffic shapes (one string, history, system)."""
    return [
        {"messages": [{"role": "user", "content": "Summarize this:\n\nAlpha beta.\n\nTL;DR?"}]},
        {
            "system": "Answer only with JSON.",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {
                    "role": "user",
                    "content": "```py\ndef f():\n    return 1\n```\n\nWhat does f return?",
                },
            ],
        },
        {"messages": []},
        {"messages": [{"role": "user", "content": [{"type": "image"}]}]},
    ]


def test_numpy_inference_equals_scikit_learn(
    starter_tasks: list[CalibrationTask], starter_bundle: ClassifierBundle
) -> None:
    bodies = fitting.task_bodies(starter_tasks) + _unseen_bodies()
    labels = [t.task_class for t in starter_tasks]
    fitted = fitting._fit_lr(
        fitting.design_matrix(fitting.task_bodies(starter_tasks)), labels, starter_bundle.fit.c
    )
    expected = fitted.model.predict_proba(fitting.design_matrix(bodies)[:, fitted.used])
    assert list(fitted.model.classes_) == list(starter_bundle.classes)
    ours = np.array([starter_bundle.probabilities(body) for body in bodies])
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-9)


def test_bundle_round_trips_through_json_and_a_policy(
    tmp_path: Path, starter_tasks: list[CalibrationTask], starter_bundle: ClassifierBundle
) -> None:
    bodies = fitting.task_bodies(starter_tasks[:10]) + _unseen_bodies()
    path = tmp_path / "bundle.json"
    path.write_text(starter_bundle.model_dump_json(), encoding="utf-8")
    again = load_bundle(path)
    assert again == starter_bundle
    none = PolicyEntry(task_class="default", verdict="none", reason="test")
    policy = Policy(
        created=datetime(2026, 11, 1, tzinfo=UTC),
        calibration_id="cal-00000001",
        model="m",
        judge="j",
        tolerance=0.95,
        mode="interval",
        classes={},
        default=none,
        classifier=starter_bundle,
    )
    loaded = load_policy(write_policy(policy, tmp_path / "policy"))
    assert loaded.classifier is not None
    assert load_bundle(tmp_path / "policy" / "latest.json") == starter_bundle
    for body in bodies:
        assert loaded.classifier.predict(body) == starter_bundle.predict(body)


def test_fitting_is_deterministic(starter_tasks: list[CalibrationTask]) -> None:
    subset = starter_tasks[::2]
    assert (
        fitting.fit_bundle(subset).model_dump_json() == fitting.fit_bundle(subset).model_dump_json()
    )


def test_a_bad_bundle_is_rejected_with_where_and_what(
    tmp_path: Path, starter_bundle: ClassifierBundle
) -> None:
    raw = starter_bundle.model_dump(mode="json")
    raw["weights"] = raw["weights"][:-1]
    path = tmp_path / "bad.json"
    import json

    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(PolicyError, match=r"bad\.json: invalid classifier.*weight rows"):
        load_bundle(path)
    raw = starter_bundle.model_dump(mode="json") | {"features_version": 0}
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(PolicyError, match="refit the classifier"):
        load_bundle(path)
    policy_without = tmp_path / "p.json"
    policy_without.write_text('{"calibration_id": "cal-00000001"}', encoding="utf-8")
    with pytest.raises(PolicyError, match="ships no classifier"):
        load_bundle(policy_without)


def test_the_proxy_loads_numpy_only_with_a_bundle_and_never_sklearn(
    tmp_path: Path, starter_bundle: ClassifierBundle
) -> None:
    path = tmp_path / "bundle.json"
    path.write_text(starter_bundle.model_dump_json(), encoding="utf-8")
    code = (
        "import sys\n"
        "import tokenlens.proxy.app\n"
        "from tokenlens.classifier.classify import classify\n"
        "from tokenlens.classifier.bundle import load_bundle\n"
        "assert 'numpy' not in sys.modules, 'numpy at import'\n"
        f"bundle = load_bundle({str(path)!r})\n"
        "body = {'messages': [{'role': 'user', 'content': 'Summarize: a b c'}]}\n"
        "found = classify(body, None, bundle.classes, bundle)\n"
        "assert found.source in ('model', 'default'), found\n"
        "heavy = [m for m in ('sklearn', 'scipy', 'pandas', 'prefect') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": "not a list"},
        {"messages": [None, 5]},
        {"messages": [{"role": "user", "content": 5}]},
        {"system": {"odd": True}, "messages": [{"role": "user", "content": [{"text": 3}]}]},
        {"system": [{"type": "text", "text": "Be brief."}], "messages": [{"content": "?"}]},
    ],
)
def test_odd_bodies_are_classified_never_raise(
    body: dict[str, object], starter_bundle: ClassifierBundle
) -> None:
    from tokenlens.classifier.classify import classify

    found = classify(body, None, starter_bundle.classes, starter_bundle)
    assert found.source in ("model", "default")
    assert found == classify(body, None, starter_bundle.classes, starter_bundle)

"""Fitting: folds, the threshold rule, and honest (nested) cross-validated labels."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tokenlens.classifier import fit as fitting
from tokenlens.classifier.evaluate import count
from tokenlens.errors import TaskFileError
from tokenlens.tasks import CalibrationTask


def test_folds_are_stratified_and_leave_one_out_at_n() -> None:
    labels = ["a"] * 4 + ["b"] * 4
    ids = [f"t{i}" for i in range(8)]
    folds = fitting.fold_ids(labels, ids, 4)
    for fold in range(4):
        members = [labels[i] for i in range(8) if folds[i] == fold]
        assert Counter(members) == {"a": 1, "b": 1}
    assert sorted(fitting.fold_ids(labels, ids, 8)) == list(range(8))
    # the file's order does not matter, only the ids
    assert fitting.fold_ids(labels[::-1], ids[::-1], 4) == folds[::-1]


def test_a_family_of_tasks_never_straddles_folds() -> None:
    """Siblings made from one template share wording: a fold that trained on one and
    scored the other would score a template the model had seen."""
    ids = [f"summ-gen-meeting-{i:02d}" for i in range(1, 6)] + ["summ-a-1", "summ-b-1"]
    ids += [f"code-gen-sql-{i}" for i in range(1, 4)] + ["code-x", "code-y-2024"]
    labels = ["summarization"] * 7 + ["code-context"] * 5
    folds = fitting.fold_ids(labels, ids, 3)
    assert len({folds[i] for i in range(5)}) == 1  # the meetings stay together
    assert len({folds[i] for i in range(7, 10)}) == 1  # the sql tasks too
    assert fitting.task_family("code-y-2024") == "code-y-2024"  # a year is not a number suffix
    # every fold still gets work: 4 summarization families and 3 code families over 3 folds
    assert set(folds) == {0, 1, 2}


def test_threshold_admits_the_most_confident_labels_up_to_the_wrong_budget() -> None:
    classes = ["a", "b"]
    # top probabilities 0.95 .. 0.55; the 3rd and 5th most confident are wrong
    top = [0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.52]
    truth = ["a", "a", "b", "a", "b", "a", "a", "a", "a", "a"]
    proba = np.array([[p, 1 - p] for p in top])
    assert fitting.choose_threshold(proba, truth, classes, max_wrong=0.0) == 0.9
    assert fitting.choose_threshold(proba, truth, classes, max_wrong=0.1) == 0.8  # 1 of 10
    assert fitting.choose_threshold(proba, truth, classes, max_wrong=0.2) == 0.52
    wrong_first = ["b", *truth[1:]]
    assert fitting.choose_threshold(proba, wrong_first, classes, max_wrong=0.0) == 1.0


def test_threshold_never_splits_a_tie() -> None:
    proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.8, 0.2]])
    # at 0.8 both tied rows come in, and one of them is wrong
    assert fitting.choose_threshold(proba, ["a", "a", "b"], ["a", "b"], max_wrong=0.0) == 0.9


def test_one_class_is_refused_with_a_clear_message(starter_tasks: list[CalibrationTask]) -> None:
    one = [t for t in starter_tasks if t.task_class == "extraction"]
    with pytest.raises(TaskFileError, match="at least two classes"):
        fitting.fit_bundle(one)


def test_cross_validated_labels_never_score_a_task_with_a_model_that_saw_it(
    starter_tasks: list[CalibrationTask], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each fold's bundle (threshold included) is fitted on the other folds only."""
    tasks = starter_tasks[:21]
    fitted_on: list[set[str]] = []
    scored: list[set[str]] = []
    real_fit = fitting.fit_bundle

    def spy_fit(train: list[CalibrationTask], **kwargs: object) -> object:
        fitted_on.append({t.id for t in train})
        bundle = real_fit(train, **kwargs)  # type: ignore[arg-type]
        real_predict = bundle.predict
        seen: set[str] = set()
        scored.append(seen)
        bodies = {repr(t.to_request(model="classifier")): t.id for t in tasks}

        class Spy:
            def predict(self, body: object) -> object:
                seen.add(bodies[repr(body)])
                return real_predict(body)  # type: ignore[arg-type]

        return Spy()

    monkeypatch.setattr(fitting, "fit_bundle", spy_fit)
    labels = fitting.cross_validated_labels(tasks, folds=3)
    assert len(labels) == len(tasks) and len(fitted_on) == 3
    assert set().union(*scored) == {t.id for t in tasks}
    for train_ids, scored_ids in zip(fitted_on, scored, strict=True):
        assert not train_ids & scored_ids


@pytest.mark.slow
def test_bundled_starter_set_cross_validated_wrong_at_most_5_percent(
    starter_tasks: list[CalibrationTask],
) -> None:
    """Regression guard for docs/classifier.md's figure: nested 5-fold family CV on all 420 tasks
    (each family labelled by a model and threshold fitted without it)."""
    true = [t.task_class for t in starter_tasks]
    right, unsure, wrong = count(true, fitting.cross_validated_labels(starter_tasks))
    assert wrong <= 0.05 * len(true), (right, unsure, wrong)
    assert unsure <= 0.30 * len(true), (right, unsure, wrong)
    assert right > 0.25 * len(true), (right, unsure, wrong)  # abstaining on all would pass

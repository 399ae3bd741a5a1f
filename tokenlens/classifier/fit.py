"""Fit the classifier on a task file and choose its abstention threshold by cross-validation.

Calibration-side only (imports scikit-learn); the proxy reads the resulting
`ClassifierBundle` and never imports this module.

Why the threshold comes from cross-validation: a wrong label routes a request to an arm
never measured on its class, while "unsure" routes it to `default`, which is safe for every
class. So the threshold is the lowest top-class probability at which the *held-out*
predictions stay within `max_wrong` wrong labels; everything less confident abstains.
`cross_validated_labels` refits the whole procedure (threshold included) on each training
fold, so the figures it yields are honest for data the classifier was not tuned on.

Folds are by task *family*, stratified by class, and assigned from the sorted ids: the
same file always gives the same folds, the same model and the same threshold. A family is
a task id without its trailing number (`summ-gen-meeting-03` -> `summ-gen-meeting`): tasks
made from one template share wording, so a fold that held out one sibling while training on
the others scored a template the model had seen, and the threshold came out too low for
requests of a new shape (issue 25: on the 420-task set, task folds admitted 2 % wrong where
held-out families showed about twice that).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from tokenlens.classifier.bundle import ClassifierBundle, FitSummary, task_digest
from tokenlens.classifier.features import N_FEATURES, hashed
from tokenlens.errors import TaskFileError
from tokenlens.routing import Confusion, confusion, merge
from tokenlens.tasks import CalibrationTask

#: Regularisation strength and wrong-label target (issue 25). Compared by nested 5-fold
#: family cross-validation (model and threshold refitted without the family they label) on
#: the training part of the starter set (the 304 tasks outside
#: `tasks_data/classifier-heldout.txt`), C in 1, 3, 10, 30 and targets 2-5 %: C=3 with 3 %
#: gave 30.6 % unsure / 3.3 % wrong there, C=10 with 4 % 27.3 % / 3.3 %. On all 420 tasks
#: the 4 % target let whole families through at once (C=10: 6.2 % wrong, C=3: 7.1 %) where
#: 3 % held (C=3: 28.8 % unsure, 2.4 % wrong), so 3 %: two points under the 5 % goal, for a
#: threshold is optimistic on requests it was not chosen on. Words of the context as
#: features were tried and dropped: they learn the families (42-63 % unsure at the same
#: targets), as did question word pairs (no gain).
DEFAULT_C = 3.0
DEFAULT_FOLDS = 5
DEFAULT_MAX_WRONG = 0.03
_FAMILY_SUFFIX = re.compile(r"-\d{1,3}$")
#: The body the proxy would see for a task (model and max_tokens do not affect features).
_MODEL = "classifier"


def task_bodies(tasks: Sequence[CalibrationTask]) -> list[dict[str, Any]]:
    """The request bodies of the tasks, built exactly as the calibration builds them."""
    return [task.to_request(model=_MODEL) for task in tasks]


def design_matrix(bodies: Sequence[Mapping[str, Any]]) -> csr_matrix:
    """One row per body: the unit-length binary vector of `features.hashed`."""
    indptr = [0]
    indices: list[int] = []
    data: list[float] = []
    for body in bodies:
        slots, weight = hashed(body)
        indices.extend(slots)
        data.extend([weight] * len(slots))
        indptr.append(len(indices))
    return csr_matrix((data, indices, indptr), shape=(len(bodies), N_FEATURES))


def task_family(task_id: str) -> str:
    """The family of a task: its id without a trailing `-<number>` (1-3 digits)."""
    return _FAMILY_SUFFIX.sub("", task_id)


def fold_ids(labels: Sequence[str], ids: Sequence[str], folds: int) -> list[int]:
    """Fold index per example: families (`task_family`) dealt round-robin in (label,
    family) order, so a family never straddles folds; stratified by label, and
    leave-one-family-out when `folds` ≥ the number of families."""
    families = sorted({(label, task_family(i)) for label, i in zip(labels, ids, strict=True)})
    fold_of = {key: position % folds for position, key in enumerate(families)}
    return [fold_of[(label, task_family(i))] for label, i in zip(labels, ids, strict=True)]


@dataclass(frozen=True)
class _Fitted:
    """A model fitted on the slots the training rows use (the others would weigh 0)."""

    model: LogisticRegression
    used: np.ndarray


def _fit_lr(matrix: csr_matrix, labels: Sequence[str], c: float) -> _Fitted:
    used = np.unique(matrix.indices)
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2_000, tol=1e-6)
    # One thread: the problem is tiny, and BLAS threads fighting over a busy machine made
    # each fit ~8x slower (measured on 2 shared cores).
    with threadpool_limits(limits=1):
        model.fit(matrix[:, used], list(labels))
    return _Fitted(model, used)


def _proba(fitted: _Fitted, matrix: csr_matrix, classes: Sequence[str]) -> np.ndarray:
    """predict_proba with columns in `classes` order (a class absent from a fold gets 0)."""
    model = fitted.model
    raw = model.predict_proba(matrix[:, fitted.used])
    out = np.zeros((matrix.shape[0], len(classes)))
    for column, name in enumerate(model.classes_):
        out[:, list(classes).index(str(name))] = raw[:, column]
    return out


def choose_threshold(
    proba: np.ndarray, labels: Sequence[str], classes: Sequence[str], max_wrong: float
) -> float:
    """The lowest top-probability threshold whose held-out wrong labels stay ≤ `max_wrong`.

    Candidates are the held-out top probabilities, most confident first; the threshold
    stops at the last one whose admitted predictions hold at most `max_wrong × n` wrong
    ones. When even the most confident is over budget it stays 1.0 (always unsure).
    """
    top = proba.max(axis=1)
    right = _right(proba, labels, classes)
    budget = math.floor(max_wrong * len(labels) + 1e-9)
    threshold = 1.0
    for candidate in np.unique(top)[::-1]:  # most confident first
        if int(((top >= candidate) & ~right).sum()) > budget:
            break
        threshold = float(candidate)
    return threshold


def _right(proba: np.ndarray, labels: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    """Whether each row's top class is its true label."""
    best = proba.argmax(axis=1)
    return np.array([classes[int(i)] == y for i, y in zip(best, labels, strict=True)])


def _check(tasks: Sequence[CalibrationTask]) -> list[str]:
    labels = [task.task_class for task in tasks]
    if len(set(labels)) < 2:
        raise TaskFileError(
            f"the classifier needs tasks of at least two classes (got {sorted(set(labels))})"
        )
    return labels


def out_of_fold_proba(
    tasks: Sequence[CalibrationTask], *, folds: int, c: float
) -> tuple[np.ndarray, list[str]]:
    """Held-out class probabilities of every task (k-fold by task), and the class order."""
    labels = _check(tasks)
    classes = sorted(set(labels))
    matrix = design_matrix(task_bodies(tasks))
    assigned = np.array(fold_ids(labels, [t.id for t in tasks], folds))
    proba = np.zeros((len(tasks), len(classes)))
    for fold in range(folds):
        test = assigned == fold
        train = ~test
        if not test.any():
            continue
        train_labels = [y for y, keep in zip(labels, train, strict=True) if keep]
        if len(set(train_labels)) < 2:
            proba[test, classes.index(train_labels[0])] = 1.0
            continue
        model = _fit_lr(matrix[train], train_labels, c)
        proba[test] = _proba(model, matrix[test], classes)
    return proba, classes


def fit_bundle(
    tasks: Sequence[CalibrationTask],
    *,
    folds: int = DEFAULT_FOLDS,
    c: float = DEFAULT_C,
    max_wrong: float = DEFAULT_MAX_WRONG,
) -> ClassifierBundle:
    """Fit on all tasks; the threshold comes from k-fold held-out probabilities."""
    labels = _check(tasks)
    folds = max(2, min(folds, len(tasks)))
    proba, classes = out_of_fold_proba(tasks, folds=folds, c=c)
    threshold = choose_threshold(proba, labels, classes, max_wrong)
    top = proba.max(axis=1)
    named = top >= threshold
    right = _right(proba, labels, classes)
    bodies = task_bodies(tasks)
    fitted = _fit_lr(design_matrix(bodies), labels, c)
    model = fitted.model
    coef = np.zeros((model.coef_.shape[0], N_FEATURES))
    coef[:, fitted.used] = model.coef_
    intercept = np.asarray(model.intercept_, dtype=float)
    if len(model.classes_) == 2:  # scikit-learn's binary form: class 1 vs class 0
        coef = np.vstack([np.zeros_like(coef[0]), coef[0]])
        intercept = np.array([0.0, intercept[0]])
    slots = np.flatnonzero(np.any(coef != 0.0, axis=0))
    return ClassifierBundle(
        classes=tuple(str(name) for name in model.classes_),
        intercept=tuple(float(v) for v in intercept),
        slots=tuple(int(s) for s in slots),
        weights=tuple(tuple(float(v) for v in coef[:, s]) for s in slots),
        threshold=threshold,
        fit=FitSummary(
            n_tasks=len(tasks),
            per_class=dict(sorted(Counter(labels).items())),
            task_digests=tuple(sorted({task_digest(body) for body in bodies})),
            folds=folds,
            c=c,
            max_wrong=max_wrong,
            cv_right=int((named & right).sum()),
            cv_unsure=int((~named).sum()),
            cv_wrong=int((named & ~right).sum()),
        ),
    )


def cross_validated_labels(
    tasks: Sequence[CalibrationTask],
    *,
    folds: int = DEFAULT_FOLDS,
    inner_folds: int = DEFAULT_FOLDS,
    c: float = DEFAULT_C,
    max_wrong: float = DEFAULT_MAX_WRONG,
) -> list[str | None]:
    """Each task's label from a bundle fitted (threshold included) without it; None = unsure.

    Nested: `fit_bundle` runs its own `inner_folds` on each training part, so no held-out
    task influences the model or the threshold that labels it. `folds` ≥ len(tasks) is
    leave-one-out.
    """
    labels = _check(tasks)
    folds = max(2, min(folds, len(tasks)))
    assigned = fold_ids(labels, [t.id for t in tasks], folds)
    out: list[str | None] = [None] * len(tasks)
    for fold in range(folds):
        train = [t for t, f in zip(tasks, assigned, strict=True) if f != fold]
        test = [i for i, f in enumerate(assigned) if f == fold]
        if not test:
            continue
        if len({t.task_class for t in train}) < 2:
            continue  # nothing to learn from: those tasks stay unsure
        bundle = fit_bundle(train, folds=inner_folds, c=c, max_wrong=max_wrong)
        for index in test:
            out[index] = bundle.predict(tasks[index].to_request(model=_MODEL)).label
    return out


def calibration_confusion(
    tasks: Sequence[CalibrationTask],
    shipped: ClassifierBundle,
    *,
    folds: int = DEFAULT_FOLDS,
) -> Confusion:
    """Where requests of each true class may land: what routing must be safe for.

    The cross-validated labels (`cross_validated_labels`, with the shipped bundle's C and
    wrong-rate target) stand for requests the classifier never saw; the shipped bundle's
    own labels cover every place it sends the calibration tasks themselves. Their cell-wise
    sum is the matrix `tokenlens.routing.arms_by_prediction` takes.
    """
    options = {"c": shipped.fit.c, "max_wrong": shipped.fit.max_wrong}
    held_out = confusion(
        tasks,
        lambda ts: cross_validated_labels(
            ts, folds=folds, inner_folds=shipped.fit.folds, **options
        ),
    )
    own = confusion(tasks, lambda ts: [shipped.predict(body).label for body in task_bodies(ts)])
    return merge(held_out, own)

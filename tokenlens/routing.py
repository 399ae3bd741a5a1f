"""The arm for each class the proxy *predicts*, safe for every true class that lands there.

The calibration certifies arms per *true* class; the proxy applies them per *predicted*
class. When the classifier sends some extraction requests to `summarization`, the
summarization entry is what those extraction requests receive. So the entry of a predicted
class must be an arm certified for every true class routed to it, and the `default` entry
(where "unsure" and unknown classes go) must be certified for every class.

Pure functions on plain data (no Prefect, pandas or file access): the decision code feeds
them the walk's results and the classifier's confusion matrix and writes the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tokenlens.compress.arms import Arm
from tokenlens.tasks import CalibrationTask

#: Column of the confusion matrix for requests the classifier abstained on.
UNSURE = "unsure"

#: true class -> predicted class (or UNSURE) -> number of tasks.
Confusion = dict[str, dict[str, int]]


def tally(true: Sequence[str], predicted: Sequence[str | None]) -> Confusion:
    """Count (true, predicted) pairs; None counts as UNSURE. Every true class gets a row."""
    if len(true) != len(predicted):
        raise ValueError(f"{len(true)} true labels but {len(predicted)} predictions")
    matrix: Confusion = {name: {} for name in dict.fromkeys(true)}
    for actual, guess in zip(true, predicted, strict=True):
        column = UNSURE if guess is None else guess
        matrix[actual][column] = matrix[actual].get(column, 0) + 1
    return matrix


def confusion(
    tasks: Sequence[CalibrationTask],
    classifier: Callable[[Sequence[CalibrationTask]], Sequence[str | None]],
) -> Confusion:
    """The confusion matrix of `classifier` on `tasks`.

    `classifier` maps tasks to labels (None = unsure) that were *not* fitted on those very
    tasks, e.g. `functools.partial(tokenlens.classifier.fit.cross_validated_labels,
    folds=5)`; in-sample labels would understate where the classifier sends a class.
    """
    return tally([task.task_class for task in tasks], list(classifier(tasks)))


def merge(*matrices: Mapping[str, Mapping[str, int]]) -> Confusion:
    """Cell-wise sum, e.g. cross-validated plus the shipped model's own in-sample labels,
    so routing also covers every place the shipped model sends a calibration task."""
    out: Confusion = {}
    for matrix in matrices:
        for actual, row in matrix.items():
            target = out.setdefault(actual, {})
            for column, count in row.items():
                target[column] = target.get(column, 0) + count
    return out


def routed_to(matrix: Mapping[str, Mapping[str, int]], predicted: str) -> list[str]:
    """True classes the classifier sent to `predicted` at least once (sorted)."""
    return sorted(actual for actual, row in matrix.items() if row.get(predicted, 0) > 0)


def _admissible(
    name: str, certified: Mapping[str, Sequence[Arm]], chosen: Mapping[str, Arm | None]
) -> list[Arm]:
    """Arms certified for `name` up to its chosen one (nothing more aggressive)."""
    arm = chosen.get(name)
    held = list(certified.get(name, ()))
    if arm is None:
        return []
    if arm not in held:
        raise ValueError(f"class {name!r}: chosen arm {arm.key} is not among its certified arms")
    return held[: held.index(arm) + 1]


def _nominal(arm: Arm) -> Any:
    return arm.ladder_rank


def safe_arm(
    classes: Iterable[str],
    certified: Mapping[str, Sequence[Arm]],
    chosen: Mapping[str, Arm | None],
    *,
    rank: Callable[[Arm], Any] = _nominal,
) -> Arm | None:
    """The arm safe for every class in `classes`, or None (apply nothing beyond pass-through).

    Worst case, not weighted by routing frequency: the gentlest of the classes' chosen
    arms, provided it is certified for each of them. A weighted choice would trade a
    rarely misrouted class's quality for the majority's savings, and that class would then
    receive an arm it was never certified for, which is what calibration exists to
    prevent. So an arm qualifies only if it is in every class's certified list up to that
    class's chosen arm (`certified[c]` ordered gentlest first: the arms held before the
    walk stopped); among those, the most aggressive by `rank` (default: the ladder's
    nominal order) that is no more aggressive than the gentlest chosen arm. A class
    without a chosen arm, or with no certified arm in common with the others, means None.
    """
    names = list(dict.fromkeys(classes))
    if not names:
        return None
    allowed = _admissible(names[0], certified, chosen)
    for name in names[1:]:
        arms = _admissible(name, certified, chosen)
        allowed = [arm for arm in allowed if arm in arms]
    if not allowed:
        return None
    # every class here has a chosen arm (else it admitted nothing and we returned above)
    cap = min(rank(arm) for name in names if (arm := chosen.get(name)) is not None)
    within = [arm for arm in allowed if rank(arm) <= cap]
    return max(within, key=rank) if within else None


def arms_by_prediction(
    matrix: Mapping[str, Mapping[str, int]],
    certified: Mapping[str, Sequence[Arm]],
    chosen: Mapping[str, Arm | None],
    *,
    rank: Callable[[Arm], Any] = _nominal,
) -> dict[str, Arm | None]:
    """The arm for each predicted class (each class of `chosen`), safe for all routed to it.

    A predicted class always counts itself among the classes routed to it, even when the
    calibration set never showed the classifier naming it correctly: live requests of that
    class will arrive there.
    """
    return {
        predicted: safe_arm(
            [predicted, *routed_to(matrix, predicted)], certified, chosen, rank=rank
        )
        for predicted in chosen
    }


def default_arm(
    certified: Mapping[str, Sequence[Arm]],
    chosen: Mapping[str, Arm | None],
    *,
    rank: Callable[[Arm], Any] = _nominal,
) -> Arm | None:
    """The `default` entry: an arm certified for every class (`safe` when only it held
    everywhere), else None. Unsure and unknown requests may be of any class, so the worst
    case over all classes applies; it is never more aggressive than any class's choice."""
    return safe_arm(list(chosen), certified, chosen, rank=rank)

"""How a classifier does on a task file: confusion matrix, right / unsure / wrong, latency.

Latency is measured on the proxy's own `classify` (header absent, every class known), so
the figure is what a request pays on the hot path, feature extraction included.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.classifier.bundle import ClassifierBundle
from tokenlens.classifier.classify import classify
from tokenlens.errors import TaskFileError
from tokenlens.routing import UNSURE, Confusion, tally
from tokenlens.tasks import CalibrationTask


@dataclass(frozen=True)
class Evaluation:
    """Counts over the evaluated tasks; `how` says how the labels were obtained."""

    how: str
    matrix: Confusion
    right: int
    unsure: int
    wrong: int
    p50_ms: float
    p99_ms: float
    latency_samples: int

    @property
    def total(self) -> int:
        return self.right + self.unsure + self.wrong


def split_holdout(
    tasks: Sequence[CalibrationTask], id_file: Path
) -> tuple[list[CalibrationTask], list[CalibrationTask]]:
    """(fit part, held-out part) of a task file, the held-out part named by id in `id_file`
    (one id per line, `#` comments): a split chosen before any tuning, and kept in a file so
    every later figure is on the same unseen tasks.

    Raises:
        TaskFileError: the id file is unreadable or names an id the tasks do not have.
    """
    try:
        lines = id_file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TaskFileError(f"{id_file}: cannot read held-out ids ({exc.strerror or exc})") from exc
    wanted: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if text:
            wanted.setdefault(text, lineno)
    known = {task.id for task in tasks}
    unknown = [f"{id_file}:{n}: no task with id {i!r}" for i, n in wanted.items() if i not in known]
    if unknown:
        raise TaskFileError("\n".join(unknown))
    if not wanted:
        raise TaskFileError(f"{id_file}: names no task")
    held = [task for task in tasks if task.id in wanted]
    rest = [task for task in tasks if task.id not in wanted]
    return rest, held


def count(true: Sequence[str], predicted: Sequence[str | None]) -> tuple[int, int, int]:
    """(right, unsure, wrong) of predictions against true labels."""
    right = sum(p == t for t, p in zip(true, predicted, strict=True))
    unsure = sum(p is None for p in predicted)
    return right, unsure, len(true) - right - unsure


def latency_ms(
    bodies: Sequence[Mapping[str, Any]],
    classifier: ClassifierBundle | None,
    known: Sequence[str],
    *,
    samples: int = 2_000,
) -> tuple[float, float, int]:
    """(p50, p99, number of timed calls) of the proxy's `classify` over the bodies."""
    if not bodies:
        return 0.0, 0.0, 0
    for body in bodies:  # warm-up: numpy import, weight table, regex caches
        classify(body, None, known, classifier)
    rounds = max(1, math.ceil(samples / len(bodies)))
    times: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for body in bodies:
            started = clock()
            classify(body, None, known, classifier)
            times.append(clock() - started)
    times.sort()

    def pick(q: float) -> float:
        return times[min(len(times) - 1, int(q * len(times)))] / 1e6

    return pick(0.50), pick(0.99), len(times)


def evaluate(
    how: str,
    true: Sequence[str],
    predicted: Sequence[str | None],
    latency: tuple[float, float, int],
) -> Evaluation:
    right, unsure, wrong = count(true, predicted)
    p50, p99, n = latency
    return Evaluation(how, tally(true, predicted), right, unsure, wrong, p50, p99, n)


def render(evaluation: Evaluation, classes: Sequence[str]) -> str:
    """The confusion matrix and the counts as plain text (columns numbered like the rows)."""
    named = {c for row in evaluation.matrix.values() for c in row}
    columns = [*classes, *sorted(named - {*classes, UNSURE})]
    width = max(len(c) for c in classes) + 5
    lines = ["confusion (rows: true class; columns: predicted, numbered as the rows):"]
    head = " " * width + "".join(f"{i + 1:>5}" for i in range(len(columns))) + f"{UNSURE:>8}"
    lines.append(head)
    for index, name in enumerate(columns):
        row = evaluation.matrix.get(name)
        if row is None:
            continue
        cells = "".join(f"{row.get(c, 0) or '.':>5}" for c in columns)
        lines.append(f"{index + 1:>2} {name:<{width - 3}}{cells}{row.get(UNSURE, 0) or '.':>8}")
    n = evaluation.total or 1
    lines.append(
        f"right {evaluation.right} ({evaluation.right / n:.1%})   "
        f"unsure {evaluation.unsure} ({evaluation.unsure / n:.1%})   "
        f"wrong {evaluation.wrong} ({evaluation.wrong / n:.1%})   of {evaluation.total} tasks"
    )
    lines.append(
        f"latency per request (proxy classify, {evaluation.latency_samples} calls): "
        f"p50 {evaluation.p50_ms:.3f} ms, p99 {evaluation.p99_ms:.3f} ms"
    )
    return "\n".join(lines)

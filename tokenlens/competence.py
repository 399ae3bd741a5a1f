"""How often the answering model's cleartext answers were right, per class.

Why it exists: retention compares a compressed answer with the cleartext one, so a model
that cannot do the tasks still yields numbers. After an offline run (a small local model)
the CLI prints this count, so a reader sees whether the verdict rests on answers the model
got right. Only tasks graded by their facts are counted: there "right" means the answer
states every fact (a grade of 100), with no judgement in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tokenlens.fact_judge import FACTS_NOTE_PREFIX


def cleartext_right(grades: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """(tasks whose cleartext answer states every fact, tasks with such a graded answer) per
    class, read from the control arm's rows of a run's grades table (the cleartext answer
    is graded there whatever the arms did). A task counts once (its first replicate)."""
    seen: dict[str, dict[str, bool]] = {}
    for row in grades:
        note = str(row.get("note") or "")
        if (
            row.get("arm") != "control"
            or not note.startswith(FACTS_NOTE_PREFIX)
            or row.get("error")
        ):
            continue
        grade = row.get("grade_clear")
        if grade is None:
            continue
        tasks = seen.setdefault(str(row["task_class"]), {})
        tasks.setdefault(str(row["task_id"]), float(grade) >= 100.0)
    return {name: (sum(tasks.values()), len(tasks)) for name, tasks in sorted(seen.items())}


def cleartext_lines(grades: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per fact-graded class: `cleartext answers stating every fact: N of M`."""
    return [
        f"{name}: cleartext answers stating every fact: {right} of {total}"
        for name, (right, total) in cleartext_right(grades).items()
    ]

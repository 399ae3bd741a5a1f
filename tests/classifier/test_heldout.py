"""The classifier on requests it has not seen (issue 25): the committed held-out split.

`tasks_data/classifier-heldout.txt` was chosen by hash before any tuning: per class the
ten real-text tasks and the five written tasks whose ids hash lowest. The fit never sees
them; these tests hold the figures the README quotes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenlens.classifier.evaluate import count, split_holdout
from tokenlens.classifier.fit import fit_bundle, task_bodies
from tokenlens.cli import main
from tokenlens.errors import TaskFileError
from tokenlens.tasks import KNOWN_CLASSES, CalibrationTask

HELDOUT = Path(__file__).parents[2] / "tasks_data" / "classifier-heldout.txt"


def test_the_split_holds_out_whole_families_of_every_class(
    starter_tasks: list[CalibrationTask],
) -> None:
    train, held = split_holdout(starter_tasks, HELDOUT)
    assert len(train) + len(held) == len(starter_tasks)
    for name in KNOWN_CLASSES:
        assert sum(t.task_class == name for t in held) >= 10, name
    real = [t for t in held if "real-text" in t.tags]
    assert len(real) == 10 * len(KNOWN_CLASSES)
    assert not {t.context for t in held} & {t.context for t in train}  # no document was fitted on


def test_held_out_unsure_at_most_30_and_wrong_at_most_5_percent(
    starter_tasks: list[CalibrationTask],
) -> None:
    train, held = split_holdout(starter_tasks, HELDOUT)
    bundle = fit_bundle(train)
    labels = [bundle.predict(body).label for body in task_bodies(held)]
    right, unsure, wrong = count([t.task_class for t in held], labels)
    assert unsure <= 0.30 * len(held), (right, unsure, wrong)
    assert wrong <= 0.05 * len(held), (right, unsure, wrong)


def test_eval_holdout_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    lines = []
    for name, question in (
        ("summarization", "Summarize this thread in three sentences."),
        ("numeric-reasoning", "How much is left of the budget in total?"),
    ):
        for i in range(6):
            row = {
                "id": f"{name[:4]}-{i}",
                "task_class": name,
                "question": question,
                "context": f"doc {i} " * (20 + i),
                "reference": "r",
            }
            lines.append(json.dumps(row))
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ids = tmp_path / "held.txt"
    ids.write_text("# held out\nsumm-5\nnume-5  # one of each\n", encoding="utf-8")
    assert main(["classify", "--eval", str(folder), "--holdout", str(ids)]) == 0
    out = capsys.readouterr().out
    assert "fitted on the 10 tasks outside" in out and "scored on the 2 it lists" in out
    ids.write_text("summ-5\nnope-1\n", encoding="utf-8")
    assert main(["classify", "--eval", str(folder), "--holdout", str(ids)]) == 2
    assert "held.txt:2: no task with id 'nope-1'" in capsys.readouterr().err
    ids.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(TaskFileError, match="names no task"):
        split_holdout([], ids)

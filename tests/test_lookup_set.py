"""The lookup set (the offline default scope's tasks): every fact re-derived from the output
it carries, outputs short, and its questions mixed from the first tasks on."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.agent_tasks import last_output, tag
from tokenlens.facts import fact_present
from tokenlens.tasks import LOOKUP_TASKS_PATH, CalibrationTask, load_tasks
from tokenlens.tokens import estimate_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "agentgen"))
from derive import derive
from kinds import LOOKUP_MAX_TOKENS

TASKS = load_tasks(LOOKUP_TASKS_PATH)


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_every_fact_follows_from_its_short_output(task: CalibrationTask) -> None:
    tool_id, output = last_output(task)
    question, facts, reference = derive(tag(task, "template"), json.loads(tag(task, "arg")), output)
    assert [(f.kind, f.value) for f in task.facts] == facts and len(facts) == 1
    assert all(f.source == tool_id for f in task.facts)
    assert task.question == question and task.reference == reference
    assert all(fact_present(f, task.reference) for f in task.facts)
    assert estimate_tokens(output) <= LOOKUP_MAX_TOKENS
    assert task.task_class == "agent-lookup" and tag(task, "source") and tag(task, "licence")


def test_the_first_fourteen_mix_the_questions() -> None:
    templates = Counter(tag(t, "template") for t in TASKS[:14])
    assert len(TASKS) == 24 and len({t.id for t in TASKS}) == 24
    assert len(templates) >= 3 and max(templates.values()) <= 8, templates


def test_the_set_validates_against_its_own_class(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenlens.cli import main

    assert main(["tasks", "validate", str(LOOKUP_TASKS_PATH)]) == 0
    out = capsys.readouterr().out
    assert "agent-lookup" in out and "no tasks for" not in out

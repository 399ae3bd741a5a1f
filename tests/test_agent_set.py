"""The bundled agent set: its shape, and every fact re-derived from the output it carries.

The facts were computed by scripts/agentgen/derive.py from each task's captured tool
output; here the same pure functions read the committed output again. A fact that no
longer follows from its output (a hand edit, a changed parser) fails by task id.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.agent_tasks import last_output, tag
from tokenlens.cli import main
from tokenlens.facts import fact_present
from tokenlens.tasks import AGENT_CLASSES, AGENT_TASKS_PATH, CalibrationTask, load_tasks
from tokenlens.tokens import estimate_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "agentgen"))
from derive import derive

TASKS = load_tasks(AGENT_TASKS_PATH)


def test_six_kinds_of_at_least_sixty_tasks() -> None:
    counts = Counter(t.task_class for t in TASKS)
    assert set(counts) == set(AGENT_CLASSES)
    assert min(counts.values()) >= 60, counts
    assert len({t.id for t in TASKS}) == len(TASKS)


def test_outputs_run_from_200_to_50k_tokens_in_every_kind() -> None:
    for kind in AGENT_CLASSES:
        sizes = [estimate_tokens(last_output(t)[1]) for t in TASKS if t.task_class == kind]
        assert min(sizes) >= 200 and max(sizes) < 50_000, kind
        assert sum(s < 1_000 for s in sizes) >= 10, kind  # small outputs are common
        assert sum(s >= 20_000 for s in sizes) >= 3, kind  # and some are large


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_every_fact_follows_from_the_captured_output(task: CalibrationTask) -> None:
    tool_id, output = last_output(task)
    arg = json.loads(tag(task, "arg"))
    question, facts, reference = derive(tag(task, "template"), arg, output)
    assert [(f.kind, f.value) for f in task.facts] == facts
    assert all(f.source == tool_id for f in task.facts)
    assert task.question == question and task.reference == reference
    # the reference states every fact, and the output holds each one as read
    assert all(fact_present(f, task.reference) for f in task.facts), task.reference


def test_every_task_is_an_agent_body_with_cache_breakpoints_and_a_source() -> None:
    for task in TASKS:
        body = task.body
        assert body is not None and task.facts, task.id
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["text"] == task.question
        uses = [b["id"] for m in body["messages"] if m["role"] == "assistant" for b in m["content"]]
        results = [
            b["tool_use_id"]
            for m in body["messages"]
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_result"
        ]
        assert uses == results and len(set(uses)) == len(uses), task.id
        assert tag(task, "source") and tag(task, "licence"), task.id


def test_the_set_validates_and_each_file_is_under_5_mb(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tasks", "validate", str(AGENT_TASKS_PATH)]) == 0
    out = capsys.readouterr().out
    assert all(kind in out for kind in AGENT_CLASSES)
    assert "extraction" not in out  # checked against the agent classes, not the starter's
    for path in AGENT_TASKS_PATH.glob("*.jsonl"):
        assert path.stat().st_size < 5_000_000, path

"""Every tool-output rung passes the fidelity check on every task of the agent set.

A rung that fabricates a line or drops one without a marker on any task is a defect, not
a tuning choice: this runs each rung over every tool output of `tasks_data/agent/` and
wants zero of both. Facts a lossy rung removes are graded by the calibration, not here;
the lossless rung must lose none.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tokenlens.compress.toolout.plugin import ToolArmCompressor
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.fidelity import check_body
from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks

#: `TOKENLENS_AGENT_TASKS` points the test at another copy of the set.
AGENT_SET = Path(os.environ.get("TOKENLENS_AGENT_TASKS", AGENT_TASKS_PATH))
RUNGS = ["lossless", "elide@0.7", "elide@0.5", "elide@0.3"]


@pytest.fixture(scope="module")
def agent_tasks() -> list:  # type: ignore[type-arg]
    tasks = [task for task in load_tasks(AGENT_SET) if task.body is not None]
    kinds = {task.task_class for task in tasks}
    assert len(kinds) >= 6 and len(tasks) >= 360, f"agent set at {AGENT_SET} is incomplete"
    return tasks


@pytest.mark.slow  # ~30 s a rung on 2 cores: every tool output of the set, checked
@pytest.mark.parametrize("rung", RUNGS)
def test_rung_is_faithful_on_every_agent_task(
    rung: str,
    agent_tasks: list,  # type: ignore[type-arg]
) -> None:
    compress = ToolArmCompressor(ToolArm.parse(rung))
    problems = []
    changed = 0
    facts_lost = 0
    for task in agent_tasks:
        body = task.to_request(model="m")
        out = compress(body)
        changed += out != body
        report = check_body(body, out, task.facts)
        facts_lost += report.facts_lost
        if not report.faithful:
            problems.append((task.id, report.problems[:2]))
    assert problems == []
    assert changed > 0  # the rung did run
    if rung == "lossless":
        assert facts_lost == 0

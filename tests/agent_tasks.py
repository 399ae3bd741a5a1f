"""Reading an agent task's tags and the tool output its question is about (the agent set's
and the lookup set's tests)."""

from __future__ import annotations

from tokenlens.tasks import CalibrationTask


def tag(task: CalibrationTask, name: str) -> str:
    (value,) = [t.split(":", 1)[1] for t in task.tags if t.startswith(name + ":")]
    return value


def last_output(task: CalibrationTask) -> tuple[str, str]:
    """(tool_use_id, output) of the last tool_result: the output the question is about."""
    assert task.body is not None
    last = task.body["messages"][-1]
    (result,) = [b for b in last["content"] if b["type"] == "tool_result"]
    return result["tool_use_id"], result["content"]

"""The per-kind tool-output walk: gentlest first, stop at the first rung that loses a fact."""

from __future__ import annotations

from tokenlens.decision.tool_output import decide_tool_output
from tokenlens.facts import Fact


def _body(output: str, command: str) -> dict:  # type: ignore[type-arg]
    use = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": command}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": output}
    return {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "Look."},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result, {"type": "text", "text": "Which?"}]},
        ],
    }


def test_walk_stops_at_the_first_rung_that_loses_a_fact() -> None:
    paths = "\n".join(f"./pkg/sub/module_{i:03d}.py" for i in range(120))
    keep = Fact(kind="path", value="./pkg/sub/module_000.py")
    middle = Fact(kind="path", value="./pkg/sub/module_060.py")
    requests = [(_body(paths, "find . -name '*.py'"), (keep, middle))]
    entries, walks = decide_tool_output({"listing": requests}, min_tasks=1)
    rungs = [r.rung for r in walks["listing"]]
    assert rungs[0] == "lossless" and walks["listing"][0].holds
    assert not walks["listing"][-1].holds  # the walk ended on a failure ...
    assert walks["listing"][-1].report.facts_lost == 1  # ... the middle path went
    entry = entries["listing"]
    assert entry.verdict == "measured" and entry.tool_arm is not None
    assert entry.tool_arm.key == rungs[-2]  # the last rung before the failure


def test_too_few_tasks_is_provisional() -> None:
    requests = [(_body("x\n" * 300, "cat x.log"), ())]
    entries, _ = decide_tool_output({"log": requests}, min_tasks=5)
    assert entries["log"].verdict == "provisional"

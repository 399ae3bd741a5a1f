"""The per-kind tool-output walk: gentlest first, stop at the first rung that loses a fact."""

from __future__ import annotations

from tokenlens.decision.tool_output import by_block_kind, decide_tool_output
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


def test_each_kind_is_walked_on_its_own_outputs_as_the_proxy_applies_it() -> None:
    """A dpkg log read with `tail` is a log, not a file read: the log walk grades it, and a
    rung walked for file reads never touches it."""
    log = "\n".join(
        f"2026-12-05 03:53:{n % 60:02d} status installed pkg{n}:amd64 1.{n}" for n in range(200)
    )
    fact = Fact(kind="version", value="1.100", source="t1")
    requests = [(_body(log, "tail -n 200 /var/log/dpkg.log"), (fact,))]
    groups = by_block_kind(requests)
    assert list(groups) == ["log"]
    _, walks = decide_tool_output({"file-read": requests, **groups}, min_tasks=1)
    read = walks["file-read"]
    assert all(r.tokens_before == 0 and r.report.facts_lost == 0 for r in read)
    assert walks["log"][0].rung == "lossless" and walks["log"][0].reduction > 0.2
    assert not walks["log"][-1].holds  # the log's own walk found where the fact goes

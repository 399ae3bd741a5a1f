"""Tool-output rungs: pure, per block, honest (the fidelity check passes), small outputs alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenlens.compress import Arm, compress_request
from tokenlens.compress.toolout.kinds import KINDS, tool_output_kind
from tokenlens.compress.toolout.markers import parse_marker
from tokenlens.compress.toolout.rungs import MIN_CHARS, ToolArm, compress_tool_text
from tokenlens.fidelity import check_text

SESSION = Path(__file__).parents[1] / "proxy" / "data" / "agent_session.json"
ARMS = ["lossless", "elide@0.7", "elide@0.5", "elide@0.3", "elide@0.1"]


def _turns() -> list[dict[str, str]]:
    turns: list[dict[str, str]] = json.loads(SESSION.read_text(encoding="utf-8"))["turns"]
    return turns


def _use(command: str) -> dict[str, object]:
    return {"type": "tool_use", "id": "t", "name": "bash", "input": {"command": command}}


@pytest.mark.parametrize("arm", ARMS)
def test_every_rung_passes_the_fidelity_check_on_real_outputs(arm: str) -> None:
    for turn in _turns():
        out = compress_tool_text(turn["output"], ToolArm.parse(arm), _use(turn["command"]))
        report = check_text(turn["output"], out)
        assert report.faithful, (turn["command"], report.problems)


def test_markers_name_the_removed_range_in_place() -> None:
    lines = [f"./pkg/mod{i}.py:{i}:    value = {i}" for i in range(1, 201)]
    lines[120] = "./pkg/mod121.py:121:    raise ValueError('boom')"
    text = "\n".join(lines)
    out = compress_tool_text(text, ToolArm.parse("elide@0.2"), _use("grep -rn value ."))
    assert "[... " in out and "raise ValueError('boom')" in out
    assert check_text(text, out).faithful
    markers = [m for m in map(parse_marker, out.splitlines()) if m is not None]
    # the run's first 34 lines, then the rest of the run up to the error's neighbours
    assert "[... 85 lines omitted: 35-119 ...]" in out.splitlines()
    assert sum(m.count for m in markers) + len(out.splitlines()) - len(markers) == 200


def test_lossless_renders_folds_and_minifies() -> None:
    noisy = "\x1b[32mok\x1b[0m   \n" + "10%\r50%\r100%\n" + "retrying\n" * 40 + "done\n"
    out = compress_tool_text(noisy * 3, ToolArm("lossless"))
    assert "\x1b" not in out and "\r" not in out and "[x40] retrying" in out
    assert check_text(noisy * 3, out).faithful
    data = json.dumps([{"name": f"pkg{i}", "version": f"1.{i}"} for i in range(30)], indent=2)
    packed = compress_tool_text(data, ToolArm("lossless"))
    assert len(packed) < len(data) / 2 and check_text(data, packed).faithful


def test_json_arrays_keep_schema_and_state_removed_indices() -> None:
    data = json.dumps({"items": [{"id": i, "name": f"n{i}"} for i in range(40)]}, indent=2)
    out = compress_tool_text(data, ToolArm.parse("elide@0.25"))
    value = json.loads(out)
    assert any(isinstance(v, str) and "items omitted" in v for v in value["items"])
    assert all(set(v) == {"id", "name"} for v in value["items"] if isinstance(v, dict))
    assert check_text(data, out).faithful


def test_small_outputs_are_left_alone() -> None:
    small = "x  \n" * ((MIN_CHARS - 1) // 4)
    for arm in ARMS:
        assert compress_tool_text(small, ToolArm.parse(arm)) == small


def test_kind_is_a_function_of_block_and_call_only() -> None:
    assert tool_output_kind("a:1:b\n", _use("grep -rn b .")) == "search"
    assert tool_output_kind("x\n", _use("cd /tmp && git log -n 3")) == "vcs"
    assert tool_output_kind("x\n", _use("find . -type f | sort")) == "listing"
    assert tool_output_kind('{"a": 1}', _use("cat a.json")) == "json"
    assert tool_output_kind("x\n", {"type": "tool_use", "name": "read_file", "input": {}}) == (
        "file-read"
    )
    assert set(KINDS) >= {"search", "listing", "file-read", "json", "log", "vcs", "other"}


def test_a_blocks_compression_does_not_depend_on_what_follows() -> None:
    turn = _turns()[8]
    use = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": turn["command"]}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": turn["output"]}
    early = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "Where does aiohttp use self._loop?"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ],
    }
    later = json.loads(json.dumps(early))
    later["messages"][2]["content"].append({"type": "text", "text": "Now only in client.py?"})
    later["messages"] += [
        {"role": "assistant", "content": "Let me check."},
        {"role": "user", "content": "And in connector.py, please, with line numbers."},
    ]
    arms = {kind: ToolArm.parse("elide@0.4") for kind in KINDS}
    first = compress_request(early, Arm("control"), tool_arms=arms)
    second = compress_request(later, Arm.parse("prune@0.5"), tool_arms=arms)
    block = first.body["messages"][2]["content"][0]
    assert block["content"] != turn["output"]
    assert second.body["messages"][2]["content"][0] == block
    assert first.tool_tokens_saved[0] > first.tool_tokens_saved[1]


@pytest.mark.parametrize(
    ("name", "rung"), [("tools-lossless", "lossless"), ("tools-elide-0.7", "elide@0.7")]
)
def test_the_rungs_ship_as_named_external_arms(name: str, rung: str) -> None:
    """`--methods ext:tools-elide-0.7` (the offline default scope's arms) is the rung itself,
    on every kind, through the same `compress_request` seam as any arm."""
    from tokenlens.compress.external import available
    from tokenlens.compress.toolout.plugin import ToolArmCompressor
    from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks

    assert name in available()
    body = load_tasks(AGENT_TASKS_PATH, classes=["agent-search"])[0].to_request(model="m")
    by_name = compress_request(body, Arm.parse(f"ext:{name}")).body
    assert by_name == ToolArmCompressor(ToolArm.parse(rung))(body)
    assert by_name != body  # this search output shrinks under both

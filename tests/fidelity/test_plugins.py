"""External compressors as arms: the plug-in seam, the adapters' failure modes, the command."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tokenlens.cli import main
from tokenlens.compress import Arm, compress_request
from tokenlens.compress.external import register
from tokenlens.compress.external.adapters import Adapter
from tokenlens.compress.external.bridge import Bridge
from tokenlens.errors import ArmUnavailable

LISTING = "\n".join(
    f"-rw-r--r-- 1 root root {n * 10:>6} Dec  5 03:53 file{n}.py" for n in range(12)
)


def _body(output: str) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "what is here?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": output},
                    {"type": "text", "text": "Which file is largest?"},
                ],
            },
        ],
    }


def _drop_third_line(body: dict[str, Any]) -> dict[str, Any]:
    result = body["messages"][2]["content"][0]
    lines = result["content"].split("\n")
    result["content"] = "\n".join(lines[:2] + lines[3:])
    return body


def test_a_registered_compressor_is_an_arm_and_its_input_is_not_mutated() -> None:
    register("test-dropper", _drop_third_line)
    body = _body(LISTING)
    result = compress_request(body, Arm.parse("ext:test-dropper"))
    assert body == _body(LISTING)
    assert result.arm == "ext:test-dropper" and 0 < result.reduction < 0.2
    assert Arm.parse("ext:test-dropper").ladder_rank > Arm.parse("llmlingua2@0.5").ladder_rank
    with pytest.raises(ValueError, match="takes no rate"):
        Arm("ext:test-dropper", 0.5)


def test_fidelity_command_refuses_a_dropping_arm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    register("test-dropper", _drop_third_line)
    path = tmp_path / "body.json"
    path.write_text(json.dumps(_body(LISTING)))
    assert main(["fidelity", str(path), "--arm", "safe"]) == 0
    assert main(["fidelity", str(path), "--arm", "safe", "--arm", "ext:test-dropper"]) == 1
    out = capsys.readouterr().out
    assert "refused: compressed tool output has 1 unmarked drops" in out
    assert "lines 3-3 of the original: 1 of 1 removed with no marker" in out
    compressed = tmp_path / "compressed.json"
    compressed.write_text(json.dumps(_drop_third_line(_body(LISTING))))
    assert main(["fidelity", str(path), "--against", str(compressed)]) == 1
    assert main(["fidelity", str(path), "--against", str(path)]) == 0


def test_unknown_and_missing_compressors_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "body.json"
    path.write_text(json.dumps(_body(LISTING)))
    assert main(["fidelity", str(path), "--arm", "ext:nothing-of-that-name"]) == 0
    assert "unavailable: no external compressor 'nothing-of-that-name'" in capsys.readouterr().out
    monkeypatch.delenv("TOKENLENS_HEADROOM_PYTHON", raising=False)
    adapter = Adapter("headroom", "tokenlens_no_such_module", "pip install headroom-ai")
    with pytest.raises(ArmUnavailable, match=r"pip install headroom-ai.*TOKENLENS_HEADROOM_PYTHON"):
        adapter(_body(LISTING))


def test_the_bridge_reports_a_worker_that_cannot_import_its_compressor() -> None:
    if importlib.util.find_spec("headroom") is not None:
        pytest.skip("headroom-ai is installed in this environment")
    bridge = Bridge(sys.executable, "headroom", {}, {})
    try:
        with pytest.raises(ArmUnavailable, match="cannot import it here"):
            bridge(_body(LISTING))
    finally:
        bridge.close()
    with pytest.raises(ArmUnavailable, match="does not exist"):
        Bridge("/nonexistent/python", "headroom", {}, {})(_body(LISTING))

"""The tool-output memo: a resent output is neither compressed nor counted again, and the
memo never answers for another text, call or arm."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.compress import Arm, compress_request, counts
from tokenlens.compress import result as result_module
from tokenlens.compress.result import body_tokens
from tokenlens.compress.toolout import body as body_module
from tokenlens.compress.toolout.kinds import KINDS
from tokenlens.compress.toolout.rungs import MIN_CHARS, ToolArm, compress_tool_text
from tokenlens.tokens import estimate_tokens

SESSION = Path(__file__).parents[1] / "proxy" / "data" / "agent_session.json"
CONTROL = Arm("control")
#: Arms by kind, one kind apart: a call that changes an output's kind changes its arm.
ELIDE = {kind: ToolArm.parse("elide@0.3" if kind == "file-read" else "elide@0.5") for kind in KINDS}


def _body(turns: int = 6) -> dict[str, Any]:
    session = json.loads(SESSION.read_text(encoding="utf-8"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": session["ask"]}]
    for n, turn in enumerate(session["turns"][:turns]):
        use = {"type": "tool_use", "id": f"toolu_01M{n}", "name": "bash"}
        use["input"] = {"command": turn["command"]}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_01M{n}", "content": turn["output"]}
        messages.append({"role": "user", "content": [result]})
    return {"model": "m", "max_tokens": 8, "messages": messages}


class Calls:
    """Counts calls to the rungs and the tokenizer as the memo module sees them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.compressed: list[str] = []
        self.counted: list[str] = []

        def compress(text: str, arm: ToolArm, tool_use: dict[str, Any] | None = None) -> str:
            self.compressed.append(text)
            return compress_tool_text(text, arm, tool_use)

        def count(text: str) -> int:
            self.counted.append(text)
            return estimate_tokens(text)

        monkeypatch.setattr(body_module, "compress_tool_text", compress)
        monkeypatch.setattr(counts, "estimate_tokens", count)


def _forget() -> None:
    body_module._memo.clear()
    counts._TEXTS.clear()
    result_module._INPUTS.clear()


@pytest.fixture(autouse=True)
def empty_memo() -> Iterator[None]:
    _forget()
    yield
    _forget()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    return Calls(monkeypatch)


def test_a_resent_body_is_neither_compressed_nor_counted_again(calls: Calls) -> None:
    body = _body()
    first = compress_request(body, CONTROL, tool_arms=ELIDE)
    _ = first.original_tokens, first.tool_tokens_saved
    assert first.tool_rewrites and calls.compressed and calls.counted
    assert len(calls.counted) == len(set(calls.counted))  # a rewrite's count serves the total
    calls.compressed.clear()
    calls.counted.clear()
    again = compress_request(copy.deepcopy(body), CONTROL, tool_arms=ELIDE)
    _ = again.original_tokens, again.tool_tokens_saved
    assert calls.compressed == [] and calls.counted == []
    assert json.dumps(again.body) == json.dumps(first.body)
    assert again.tool_tokens_saved == first.tool_tokens_saved


def test_only_the_new_output_of_a_next_turn_is_compressed(calls: Calls) -> None:
    compress_request(_body(5), CONTROL, tool_arms=ELIDE)
    calls.compressed.clear()
    compress_request(_body(6), CONTROL, tool_arms=ELIDE)
    newest = json.loads(SESSION.read_text(encoding="utf-8"))["turns"][5]["output"]
    assert calls.compressed == [newest]


def test_the_same_id_with_another_text_call_or_arm_is_compressed_afresh() -> None:
    body = _body()
    compress_request(body, CONTROL, tool_arms=ELIDE)
    changed = copy.deepcopy(body)
    block = changed["messages"][4]["content"][0]  # turn 1: another text
    block["content"] = "# another output\n" + block["content"]
    use = changed["messages"][5]["content"][0]  # turn 2: a call of another kind, same text
    use["input"] = {"command": "sed -n '1,40p' notes.txt"}
    for arms in (ELIDE, {kind: ToolArm.parse("elide@0.1") for kind in ELIDE}):
        got = compress_request(changed, CONTROL, tool_arms=arms)
        _forget()
        fresh = compress_request(changed, CONTROL, tool_arms=arms)
        assert json.dumps(got.body) == json.dumps(fresh.body)
        compress_request(body, CONTROL, tool_arms=ELIDE)  # the memo as before the change


def test_counts_kept_by_the_memo_are_the_tokenizer_s() -> None:
    body = _body()
    for _ in range(2):  # the second time from the memo
        result = compress_request(body, CONTROL, tool_arms=ELIDE)
        assert result.tool_rewrites
        for rewrite in result.tool_rewrites:
            assert rewrite.before_tokens == estimate_tokens(rewrite.before)
            assert rewrite.after_tokens == estimate_tokens(rewrite.after)
        assert result.original_tokens == body_tokens(body)
        assert result.compressed_tokens == body_tokens(result.body)
        assert result.tokens_saved == result.original_tokens - result.compressed_tokens > 0


def test_small_outputs_never_reach_the_rungs(calls: Calls) -> None:
    body = _body()
    for message in body["messages"][2::2]:
        message["content"][0]["content"] = message["content"][0]["content"][: MIN_CHARS - 1]
    result = compress_request(body, CONTROL, tool_arms=ELIDE)
    assert result.tool_rewrites == () and calls.compressed == []


def test_the_memo_keeps_its_bound_and_drops_the_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body_module, "_memo", body_module._Memo(2))
    calls = Calls(monkeypatch)
    body = _body(3)  # outputs 1 and 2 are long enough to compress
    compress_request(body, CONTROL, tool_arms=ELIDE)
    assert len(calls.compressed) == 2
    one = body["messages"][4]["content"][0]["content"]
    third = _body(4)
    del third["messages"][3:7]  # turn 3 alone: a third output, which drops turn 1's
    compress_request(third, CONTROL, tool_arms=ELIDE)
    calls.compressed.clear()
    del body["messages"][5:]  # turn 1 again
    compress_request(body, CONTROL, tool_arms=ELIDE)
    assert calls.compressed == [one]


def test_the_same_output_under_another_id_is_not_compressed_again(calls: Calls) -> None:
    body = _body()
    first = compress_request(body, CONTROL, tool_arms=ELIDE)
    again = copy.deepcopy(body)
    for message in again["messages"][1:]:
        block = message["content"][0]
        for key in ("id", "tool_use_id"):
            if key in block:
                block[key] += "-rerun"
    calls.compressed.clear()
    second = compress_request(again, CONTROL, tool_arms=ELIDE)
    assert calls.compressed == []
    assert [r.after for r in second.tool_rewrites] == [r.after for r in first.tool_rewrites]
    assert all(r.tool_use_id.endswith("-rerun") for r in second.tool_rewrites)

"""Earlier user turns are instructions: no lossy rung rewrites them unless they are documents."""

from __future__ import annotations

import pytest

from tokenlens.compress import Arm, compress_request
from tokenlens.compress.slots import is_document_like

ASK_1 = "Show me how aiohttp implements raise_for_status, timeout and release."
ASK_2 = "Where does aiohttp use self._loop?"
LOSSY = ["prune@0.6", "prune@0.3", "select@0.5"]


def _agent_body(guide_md: str) -> dict:
    code = "def raise_for_status(self) -> None:\n    if self.status >= 400:\n        raise\n"
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": ASK_1},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "t1", "name": "grep", "input": {"q": "raise_"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": code}],
            },
            {"role": "assistant", "content": "It raises ClientResponseError when status >= 400."},
            {"role": "user", "content": [{"type": "text", "text": ASK_2}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t2", "name": "grep", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": code},
                    {"type": "text", "text": guide_md},
                    {"type": "text", "text": "Summarise both answers in a table."},
                ],
            },
        ],
    }


@pytest.mark.parametrize("arm", LOSSY)
def test_earlier_user_instructions_come_through_intact(arm: str, guide_md: str) -> None:
    body = _agent_body(guide_md)
    out = compress_request(body, Arm.parse(arm)).body["messages"]
    assert out[0]["content"] == ASK_1
    assert out[4]["content"] == [{"type": "text", "text": ASK_2}]
    assert out[6]["content"][1]["text"] != guide_md  # the last turn's document still compresses


@pytest.mark.parametrize("arm", LOSSY)
def test_an_earlier_turn_that_pastes_a_document_is_compressed_but_its_ask_is_kept(
    arm: str, guide_md: str
) -> None:
    ask = "Read this guide and tell me how rollbacks work, step by step."
    body = _agent_body(guide_md)
    body["messages"][0]["content"] = guide_md + "\n" + ask
    out = compress_request(body, Arm.parse(arm)).body["messages"][0]["content"]
    assert out != body["messages"][0]["content"]
    assert out.endswith(ask)
    body["messages"][0]["content"] = [
        {"type": "text", "text": guide_md},
        {"type": "text", "text": ask},
    ]
    blocks = compress_request(body, Arm.parse(arm)).body["messages"][0]["content"]
    assert blocks[0]["text"] != guide_md and blocks[1]["text"] == ask


def test_document_like_rule(guide_md: str) -> None:
    assert is_document_like(guide_md)
    assert not is_document_like(ASK_1)
    assert not is_document_like(ASK_2)
    # long, but one paragraph of instructions: not a document
    assert not is_document_like(" ".join([ASK_1] * 30))
    # a short list of asks is structured but short: not a document
    assert not is_document_like("Please:\n\n- fix the test\n- run ruff\n- commit\n")


@pytest.mark.parametrize("arm", ["safe", "minify", "dedup"])
def test_lossless_rungs_may_still_tidy_earlier_turns(arm: str, guide_md: str) -> None:
    body = _agent_body(guide_md)
    body["messages"][0]["content"] = "Show   me   how   it   works."
    out = compress_request(body, Arm.parse(arm)).body["messages"][0]["content"]
    if arm == "safe":
        assert out == "Show me how it works."

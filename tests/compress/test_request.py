"""`compress_request`: what it may touch, what it never touches, determinism, shape."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from tokenlens.compress import Arm, CompressionResult, CompressSettings, compress_request
from tokenlens.compress.slots import split_question
from tokenlens.errors import CompressionError
from tokenlens.tasks import CalibrationTask

LOSSLESS = ["safe", "minify", "dedup"]
LOSSY = ["prune@0.5", "select@0.5"]
ALL = ["control", *LOSSLESS, *LOSSY]


def _long(guide_md: str) -> str:
    return "Some   spaced   text.\n\n\n\n" + guide_md


def _task_body(guide_md: str) -> dict:
    task = CalibrationTask(
        id="t1",
        task_class="long-doc-qa",
        question="How   do I roll back a failed deployment?",
        context=_long(guide_md),
        reference="Run the rollback command with the previous version.",
        system="You are a careful assistant.   Answer briefly.",
    )
    return task.to_request(model="claude-haiku-4-5")


def _dump(body: dict) -> str:
    return json.dumps(body, sort_keys=False, ensure_ascii=False)


@pytest.mark.parametrize("arm", ALL)
def test_input_never_mutated_and_output_deterministic(arm: str, guide_md: str) -> None:
    body = _task_body(guide_md)
    before = copy.deepcopy(body)
    first = compress_request(body, Arm.parse(arm))
    second = compress_request(body, Arm.parse(arm))
    assert body == before
    assert _dump(first.body) == _dump(second.body)
    assert isinstance(first, CompressionResult) and first.arm == Arm.parse(arm).key


def test_control_is_an_unchanged_copy(guide_md: str) -> None:
    body = _task_body(guide_md)
    result = compress_request(body, Arm("control"))
    assert result.body == body and result.body is not body
    assert result.reduction == 0.0 and result.original_tokens == result.compressed_tokens
    assert result.eligible_blocks == 0 and result.total_blocks > 0


@pytest.mark.parametrize("arm", LOSSY)
def test_lossy_arms_reduce_context_and_report_measured_figures(arm: str, guide_md: str) -> None:
    result = compress_request(_task_body(guide_md), Arm.parse(arm))
    assert result.compressed_tokens < result.original_tokens
    expected = (result.original_tokens - result.compressed_tokens) / result.original_tokens
    assert result.reduction == pytest.approx(expected)
    assert 0 < result.eligible_blocks < result.total_blocks
    assert result.question_found and result.elapsed_ms >= 0


@pytest.mark.parametrize("arm", ALL)
def test_question_block_never_compressed(arm: str, guide_md: str) -> None:
    body = _task_body(guide_md)
    out = compress_request(body, Arm.parse(arm)).body
    assert out["messages"][-1]["content"][-1] == body["messages"][-1]["content"][-1]
    assert len(out["messages"][-1]["content"]) == 2


@pytest.mark.parametrize("arm", LOSSY)
def test_system_prompt_only_gets_lossless_rungs_by_default(arm: str, guide_md: str) -> None:
    body = _task_body(guide_md)
    body["system"] = _long(guide_md)
    assert compress_request(body, Arm.parse(arm)).body["system"] == body["system"]
    assert compress_request(body, Arm("safe")).body["system"] != body["system"]
    opened = CompressSettings(compress_system=True)
    assert compress_request(body, Arm.parse(arm), settings=opened).body["system"] != body["system"]


def test_single_string_message_keeps_its_final_paragraph(guide_md: str) -> None:
    question = "Given all that, how do I roll back?\n\n```bash\norchard status\n```\n"
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": guide_md + "\n" + question}],
    }
    for arm in ALL:
        out = compress_request(body, Arm.parse(arm)).body
        content = out["messages"][0]["content"]
        assert isinstance(content, str)
        assert content.endswith(question)
    context, tail = split_question("Just one short instruction.")
    assert context == "" and tail == "Just one short instruction."


def _cached_body(guide_md: str) -> dict:
    doc = _long(guide_md)
    return {
        "model": "m",
        "max_tokens": 10,
        "tools": [{"name": "lookup", "description": doc, "input_schema": {"type": "object"}}],
        "system": [
            {"type": "text", "text": doc},
            {"type": "text", "text": doc, "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": doc, "cache_control": {"type": "ephemeral"}}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": doc},
                    {"type": "tool_use", "id": "tu1", "name": "lookup", "input": {"q": doc}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "tu1",
                        "content": [{"type": "text", "text": doc}],
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": doc},
                    },
                    {"type": "text", "text": doc},
                    {"type": "text", "text": "What is the rollback procedure?"},
                ],
            },
        ],
    }


@pytest.mark.parametrize("arm", ALL)
def test_never_touched_parts(arm: str, guide_md: str) -> None:
    body = _cached_body(guide_md)
    out = compress_request(
        body, Arm.parse(arm), settings=CompressSettings(compress_system=True)
    ).body
    assert out["tools"] == body["tools"]
    assert out["system"] == body["system"]  # all of it is before the message breakpoint
    assert out["messages"][0] == body["messages"][0]  # the breakpoint block itself
    assert out["messages"][1] == body["messages"][1]  # assistant turn, tool_use
    last_in, last_out = body["messages"][2]["content"], out["messages"][2]["content"]
    assert [b["type"] for b in last_out] == [b["type"] for b in last_in]
    assert last_out[:3] == last_in[:3]  # tool_result, image, document
    assert last_out[4] == last_in[4]  # the question
    if arm not in ("control", "minify", "dedup"):  # nothing repeats inside one copy
        assert last_out[3] != last_in[3]  # the fresh context after the breakpoint is fair game
    json.loads(json.dumps(out))


@pytest.mark.parametrize("arm", ["safe", *LOSSY])
def test_system_breakpoint_freezes_only_what_precedes_it(arm: str, guide_md: str) -> None:
    body = _cached_body(guide_md)
    body["messages"][0]["content"][0].pop("cache_control")
    settings = CompressSettings(compress_system=True)
    out = compress_request(body, Arm.parse(arm), settings=settings).body
    assert out["system"] == body["system"]
    assert out["messages"][0] != body["messages"][0]


def test_top_level_cache_control_freezes_everything(guide_md: str) -> None:
    body = _task_body(guide_md)
    body["cache_control"] = {"type": "ephemeral"}
    for arm in ALL:
        result = compress_request(body, Arm.parse(arm))
        assert result.body == body and result.reduction == 0.0


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"messages": "hi"},
        {"messages": [{"content": "x"}]},
        {"messages": [{"role": "user", "content": 3}]},
    ],
)
def test_malformed_bodies_raise_compression_error(bad: object) -> None:
    with pytest.raises(CompressionError):
        compress_request(bad, Arm("safe"))  # type: ignore[arg-type]


def test_import_is_light() -> None:
    code = (
        "import sys, tokenlens.compress, tokenlens.compress.request, tokenlens.compress.lingua\n"
        "heavy = [m for m in ('torch', 'transformers', 'llmlingua', 'pandas', 'prefect', 'pyarrow')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""

"""The proxy's JSON reading and writing (orjson, `json` where orjson would differ): the
same values as `json`, the same bytes as compact `json.dumps`, no number changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenlens.proxy.plan import encode_body, parse_body

SESSION = Path(__file__).parent / "data" / "agent_session.json"


def _stdlib(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _bodies() -> list[dict[str, Any]]:
    session = json.loads(SESSION.read_text(encoding="utf-8"))
    texts = [turn["output"] for turn in session["turns"]]
    odd = 'tab\t nul\x00 del\x7f sep\u2028\u2029 bom\ufeff astral\U0001f600 quote" back\\ é'
    return [
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
        for text in [*texts, odd]
    ] + [
        {
            "model": "m",
            "temperature": 0.7,
            "top_p": 1e-7,
            "max_tokens": 1024,
            "metadata": {"n": -(2**63), "m": 2**64 - 1, "x": 1e16, "z": -0.0},
            "messages": [{"role": "user", "content": [{"type": "text", "text": odd}]}],
        }
    ]


@pytest.mark.parametrize("indent", [None, 2])
def test_parse_reads_what_json_reads(indent: int | None) -> None:
    for body in _bodies():
        raw = json.dumps(body, indent=indent, ensure_ascii=indent is None).encode()
        assert parse_body(raw) == json.loads(raw)


def test_an_integer_past_64_bits_comes_through_exactly() -> None:
    big = 123456789012345678901234567890
    raw = b'{"model":"m","metadata":{"n":%d},"messages":[]}' % big
    parsed = parse_body(raw)
    assert parsed["metadata"]["n"] == big and isinstance(parsed["metadata"]["n"], int)
    assert encode_body(parsed) == raw


def test_a_long_digit_run_in_a_string_reads_the_same() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "t=1733380000000000000123"}]}
    raw = json.dumps(body).encode()
    assert parse_body(raw) == body


@pytest.mark.parametrize(
    "raw", [b'{"t": NaN}', b'{"t": Infinity}', b'{"t": -Infinity}', b'{"t": 1e400}', b"{"]
)
def test_what_strict_json_cannot_say_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_body(raw)


def test_encode_writes_compact_json_s_bytes() -> None:
    for body in _bodies():
        if "temperature" in body:  # a small exponent is written 1e-7, not 1e-07
            assert json.loads(encode_body(body)) == body
        else:
            assert encode_body(body) == _stdlib(body)

"""Policy hot reload, wire helpers and counters, without a server."""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
from pathlib import Path

import pytest

from tokenlens.commands.serve import register
from tokenlens.errors import PolicyError, TokenLensError
from tokenlens.policy import Policy, write_policy
from tokenlens.proxy import relay
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.proxy.settings import settings_from_args
from tokenlens.proxy.stats import ProxyStats, pair_retention, percentile

from .conftest import entry, make_policy, standard_policy


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_store_reloads_a_changed_file(policy_file: Path) -> None:
    store = PolicyStore(policy_file)
    seen: list[Policy] = []
    store.on_change(seen.append)
    assert store.refresh() is False  # unchanged file: nothing to do
    new = make_policy({"extraction": entry("extraction", "measured", "minify")}, cid="cal-22222222")
    write_policy(new, policy_file.parent)
    assert store.refresh() is True
    assert store.policy.calibration_id == "cal-22222222"
    assert [p.calibration_id for p in seen] == ["cal-22222222"]
    assert store.reloads == 1 and store.last_error is None


def test_store_rejects_an_invalid_file_and_keeps_the_last_good(
    policy_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = PolicyStore(policy_file)
    policy_file.write_text('{"schema_version": 1, "classes": {')
    _bump_mtime(policy_file)
    with caplog.at_level(logging.WARNING):
        assert store.refresh() is False
    assert store.policy.calibration_id == "cal-00000001"
    assert store.rejections == 1 and "not valid JSON" in (store.last_error or "")
    assert "policy rejected" in caplog.text and "not valid JSON" in caplog.text
    # Schema-valid JSON with a bad verdict is rejected too, naming the field.
    bad = json.loads(standard_policy().model_dump_json())
    bad["classes"]["extraction"]["verdict"] = "probably"
    policy_file.write_text(json.dumps(bad))
    _bump_mtime(policy_file)
    assert store.refresh() is False
    assert "classes.extraction.verdict" in (store.last_error or "")
    # A missing file is a rejection as well, and a good file afterwards is picked up.
    policy_file.unlink()
    assert store.refresh() is False and "missing" in (store.last_error or "")
    write_policy(standard_policy("cal-33333333"), policy_file.parent)
    assert store.refresh() is True and store.policy.calibration_id == "cal-33333333"


def test_store_refuses_to_start_without_a_good_policy(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy"):
        PolicyStore(tmp_path / "nope.json")
    broken = tmp_path / "broken.json"
    broken.write_text("[]")
    with pytest.raises(PolicyError, match=r"broken\.json"):
        PolicyStore(broken)


def test_request_headers_cross_except_hop_by_hop_and_our_own() -> None:
    raw = [
        (b"Host", b"127.0.0.1:8787"),
        (b"x-api-key", b"sk-1"),
        (b"anthropic-version", b"2023-06-01"),
        (b"anthropic-beta", b"a,b"),
        (b"Content-Length", b"10"),
        (b"Connection", b"keep-alive"),
        (b"x-tokenlens-class", b"extraction"),
        (b"accept-encoding", b"gzip"),
    ]
    names = [k.lower() for k, _ in relay.request_headers(raw, keep_length=False)]
    assert names == ["x-api-key", "anthropic-version", "anthropic-beta", "accept-encoding"]
    kept = [k.lower() for k, _ in relay.request_headers(raw, keep_length=True)]
    assert "content-length" in kept
    # aiohttp writes header text as UTF-8: UTF-8 bytes cross unchanged
    utf8 = "naïve ✓".encode()
    [(_, value)] = relay.request_headers([(b"x-note", utf8)], keep_length=False)
    assert value.encode() == utf8
    assert relay.call_headers(raw) == {
        "x-api-key": "sk-1",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "a,b",
    }


def test_response_headers_keep_retry_after_and_drop_hop_by_hop() -> None:
    raw = [(b"Retry-After", b"7"), (b"Transfer-Encoding", b"chunked"), (b"request-id", b"r")]
    assert relay.response_headers(raw) == [(b"retry-after", b"7"), (b"request-id", b"r")]


def _sse(*events: tuple[str, dict[str, object]]) -> bytes:
    return b"".join(f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events)


STREAM = _sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": 9, "cache_read_input_tokens": 4}},
        },
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hel"}},
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "lo"}},
    ),
    ("message_stop", {"type": "message_stop"}),
)


@pytest.mark.parametrize("size", [1, 7, 64, len(STREAM)])
def test_sse_tap_reads_events_split_anywhere(size: int) -> None:
    tap = relay.SseTap(capture_text=True)
    for i in range(0, len(STREAM), size):
        tap.feed(STREAM[i : i + size])
    assert tap.usage == {"input_tokens": 9, "cache_read_input_tokens": 4}
    assert tap.text == "Hello" and tap.complete


def test_sse_tap_stops_early_when_not_capturing() -> None:
    tap = relay.SseTap(capture_text=False)
    tap.feed(STREAM)
    assert tap.usage is not None and tap.done and tap.text == ""


def test_decode_body_handles_gzip_and_refuses_unknown() -> None:
    data = b'{"a": 1}'
    assert relay.decode_body(gzip.compress(data), "gzip") == data
    assert relay.decode_body(data, None) == data
    assert relay.decode_body(data, "br") is None
    assert relay.decode_body(b"not gzip", "gzip") is None


def test_count_body_keeps_only_what_count_tokens_accepts() -> None:
    body = {"model": "m", "messages": [], "max_tokens": 5, "stream": True, "system": "s"}
    assert relay.count_body(body) == {"model": "m", "messages": [], "system": "s"}


def test_pair_retention_is_capped_and_refuses_a_zero_cleartext() -> None:
    assert pair_retention(80, 100) == 0.8
    assert pair_retention(100, 80) == 1.0
    assert pair_retention(50, 0) is None


def test_rolling_window_and_dollars() -> None:
    stats = ProxyStats(judge_window=3)
    for value in (1.0, 0.2, 0.4, 0.6):
        window = stats.record_judgement("x", "prune@0.5", value, "note")
    assert window.n == 3 and window.mean == pytest.approx(0.4)
    stats.record_compression("x", "claude-haiku-4-5", 1_000_000, 400_000, 3.0)
    assert stats.dollars_saved == pytest.approx(0.6)  # 600k tokens at $1/Mtok
    stats.record_compression("x", "unknown-model", 100, 50, 1.0)
    assert stats.unpriced_models == 1 and stats.dollars_saved == pytest.approx(0.6)
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0 and percentile([], 50) is None


def test_serve_flags_for_upstream_timeouts_and_client_limits() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    flags = ["--upstream-timeout", "30", "--connect-timeout", "2", "--max-header-count", "20"]
    flags += ["--max-header-bytes", "8192", "--header-timeout", "3", "--keep-alive-timeout", "7"]
    settings = settings_from_args(parser.parse_args(["serve", *flags]))
    assert (settings.upstream_timeout_s, settings.connect_timeout_s) == (30.0, 2.0)
    assert (settings.max_header_count, settings.max_header_bytes) == (20, 8192)
    assert (settings.header_timeout_s, settings.keepalive_timeout_s) == (3.0, 7)
    with pytest.raises(TokenLensError, match="upstream_timeout_s must be > 0"):
        settings_from_args(parser.parse_args(["serve", "--upstream-timeout", "0"]))
    with pytest.raises(TokenLensError, match="max_header_count must be >= 1"):
        settings_from_args(parser.parse_args(["serve", "--max-header-count", "0"]))

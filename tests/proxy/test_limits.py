"""What clients may send the proxy: header limits, head deadline, idle keep-alive; and the
codec path failing open whatever breaks in it (issue 15's defects, each with its test)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

import anthropic
import httpx
import pytest

from tokenlens.proxy.settings import ProxySettings

from .conftest import KEY, MODEL, ProxyServer, RecordingUpstream, ThreadServer

StartProxy = Callable[..., ProxyServer]


def _connect(proxy: ProxyServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the proxy closes the connection."""
    parts = []
    while part := sock.recv(65536):
        parts.append(part)
    return b"".join(parts)


def test_a_deeply_nested_body_fails_open_to_the_original_bytes(
    recording_upstream: tuple[RecordingUpstream, ThreadServer],
    start_proxy: StartProxy,
    policy_file: Path,
) -> None:
    """Issue 15: 100,000 levels of nesting gave `502 (RecursionError)` and nothing upstream."""
    recorder, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url, policy_path=policy_file))
    deep = b'{"model":"%s","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"x":' % (
        MODEL.encode()
    )
    raw = deep + b"[" * 100_000 + b"]" * 100_000 + b"}"
    got = httpx.post(
        f"{proxy.base_url}/v1/messages",
        content=raw,
        headers={"x-api-key": KEY, "content-type": "application/json"},
    )
    assert got.status_code == 200, got.text
    assert recorder.seen[-1].body == raw  # forwarded byte for byte
    assert proxy.feed()["fail_opens"] == {"error:RecursionError": 1}


def test_too_many_headers_get_a_431(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    recorder, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url, max_header_count=50))
    many = [(f"x-h{i}", "v") for i in range(60)]
    with pytest.raises(anthropic.APIStatusError) as caught:
        anthropic.Anthropic(
            api_key=KEY, base_url=proxy.base_url, max_retries=0, default_headers=dict(many)
        ).messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 431
    assert "--max-header-count" in caught.value.body["error"]["message"]
    assert recorder.seen == []  # nothing forwarded
    ok = httpx.get(f"{proxy.base_url}/v1/models", headers=dict(many[:10]))
    assert ok.status_code == 200


@pytest.mark.parametrize("size", [20_000, 4 * 1024 * 1024])
def test_oversized_headers_get_a_431(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy, size: int
) -> None:
    """Over the limit in one small read (checked on the parsed headers) or in a 4 MB header
    (refused while it is still arriving, before it is all in memory)."""
    recorder, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url, max_header_bytes=16 * 1024))
    try:
        got = httpx.get(f"{proxy.base_url}/v1/models", headers={"x-big": "a" * size})
    except httpx.TransportError:  # the proxy may close before the client finished sending
        assert size > 1024 * 1024
    else:
        assert got.status_code == 431
        assert ("--max-header-bytes" in got.text) or ("too large" in got.text)
    assert recorder.seen == []


def test_a_slowloris_head_gets_a_408_at_the_header_timeout(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    """Issue 15: 50 connections trickling a request head stayed open indefinitely."""
    _, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url, header_timeout_s=1.0))
    socks = [_connect(proxy) for _ in range(20)]
    started = time.monotonic()
    for sock in socks:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n")
    for _ in range(4):  # keep trickling: every byte is progress to a per-read timeout
        time.sleep(0.2)
        for sock in socks:
            sock.sendall(b"x-a: b\r\n")
    answers = [_read_all(sock) for sock in socks]
    elapsed = time.monotonic() - started
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[0]
    assert 0.9 < elapsed < 5
    for sock in socks:
        sock.close()
    # a connection that says nothing at all is closed too, without an answer
    silent = _connect(proxy)
    assert _read_all(silent) == b""
    silent.close()
    assert httpx.get(f"{proxy.base_url}/v1/models").status_code == 200  # still serving


def _read_answer(sock: socket.socket) -> bytes:
    """One answer with a content-length, leaving the connection open."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_an_idle_kept_alive_connection_lives_for_the_keep_alive_timeout(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    """Idle between requests, the keep-alive timeout applies (not the shorter head
    deadline, which starts with the next request's first byte); then the proxy closes."""
    _, upstream = recording_upstream
    proxy = start_proxy(
        ProxySettings(upstream=upstream.base_url, keepalive_timeout_s=2, header_timeout_s=0.5)
    )
    sock = _connect(proxy)
    request = b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n"
    sock.sendall(request)
    assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
    time.sleep(1.0)  # past the head deadline, within the keep-alive timeout
    sock.sendall(request)
    answer = _read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"path": "/v1/models"}
    started = time.monotonic()
    assert _read_all(sock) == b""  # closed once idle for the keep-alive timeout
    assert 1.5 < time.monotonic() - started < 6
    sock.close()

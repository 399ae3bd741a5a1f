"""What clients may send the proxy: header limits, head and body deadlines, idle keep-alive;
the codec path failing open whatever breaks in it (issue 15's defects, each with its test);
clients that leave mid-body and refusals in /metrics (issue 24)."""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anthropic
import httpx
import pytest

from tokenlens.proxy.settings import MIN_BODY_RATE, ProxySettings

from .conftest import KEY, MODEL, ProxyServer, RecordingUpstream, ThreadServer
from .scripted import Conn, Scripted, answering, reply

StartProxy = Callable[..., ProxyServer]


def _connect(proxy: ProxyServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=GUARD_S)
    return sock


#: How long a read waits before the test fails: only a proxy that never answers meets it.
GUARD_S = 60.0


def _trickle_until_answered(socks: list[socket.socket], piece: bytes) -> list[bytes]:
    """Send `piece` on each socket every 0.2 s for as long as the proxy has not answered it
    (progress to any per-read timeout, forever), then read each answer whole."""
    pending = list(socks)
    guard = time.monotonic() + GUARD_S
    while pending:
        assert time.monotonic() < guard, f"{len(pending)} connections never answered"
        readable, _, _ = select.select(pending, [], [], 0.2)
        pending = [sock for sock in pending if sock not in readable]
        for sock in pending:
            with contextlib.suppress(OSError):  # closed at the deadline
                sock.sendall(piece)
    return [_read_all(sock) for sock in socks]


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the proxy closes the connection (a proxy that closes with bytes of
    ours unread resets it: what it sent before is read all the same)."""
    parts = []
    with contextlib.suppress(ConnectionResetError):
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
    started = time.monotonic()  # before the first connection: no deadline starts earlier
    socks = [_connect(proxy) for _ in range(20)]
    for sock in socks:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n")
    # keep trickling until answered: every byte is progress to a per-read timeout, so only
    # a deadline for the whole head ends this
    answers = _trickle_until_answered(socks, b"x-a: b\r\n")
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[0]
    assert time.monotonic() - started >= 1.0 - 1e-3  # not before the deadline (one side only)
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
        ProxySettings(upstream=upstream.base_url, keepalive_timeout_s=4, header_timeout_s=0.5)
    )
    sock = _connect(proxy)
    request = b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n"
    sock.sendall(request)
    assert _read_answer(sock).startswith(b"HTTP/1.1 200 ")
    time.sleep(1.0)  # past the head deadline (at least), within the keep-alive timeout
    sent = time.monotonic()  # before the answer whose end starts the keep-alive timer
    sock.sendall(request)
    answer = _read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"path": "/v1/models"}
    assert _read_all(sock) == b""  # closed once idle for the keep-alive timeout
    assert time.monotonic() - sent >= 4 - 1e-3  # not before it (one side only)
    sock.close()


# --- issue 24: request bodies, clients that leave, refusals in /metrics ----------------------


def _refused(proxy: ProxyServer, status: int, reason: str) -> float:
    metrics = httpx.get(f"{proxy.base_url}/metrics").text
    prefix = f'tokenlens_refused_requests_total{{reason="{reason}",status="{status}"}} '
    lines = [line for line in metrics.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def test_a_trickled_body_gets_a_408_at_the_body_timeout(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """Issue 24: 20 clients trickling a body at 1 byte/s held their connections (and, for a
    body streamed through, the upstream's) for as long as they liked."""
    srv = upstream(answering(lambda request: reply(body=b"got %d" % len(request.body))))
    proxy = start_proxy(ProxySettings(upstream=srv.url, body_timeout_s=1.0))
    head = b"POST /v1/messages/count_tokens HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n"
    started = time.monotonic()  # before any head: no body deadline starts earlier
    socks = [_connect(proxy) for _ in range(20)]
    for sock in socks:
        sock.sendall(head + b"{")
    # one byte every 0.2 s until answered: progress, but far below any sane rate
    answers = _trickle_until_answered(socks, b" ")
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[0]
    assert b"body not received in time" in answers[0]
    assert time.monotonic() - started >= 1.0 - 1e-3  # not before the deadline (one side only)
    for sock in socks:
        sock.close()
    assert srv.wait_ended(20)  # every upstream connection the bodies held was let go
    assert _refused(proxy, 408, "body_timeout") == 20
    with httpx.Client(base_url=proxy.base_url) as client:  # still serving, bodies and all
        assert client.post("/v1/messages/count_tokens", content=b"{}").content == b"got 2"


def test_a_slow_but_steady_large_upload_is_not_cut_off(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    """The body deadline grows with what arrived (one second per MIN_BODY_RATE bytes).

    The upload outlasts the 1 s timeout (at least 3.5 s of sleeps), yet every piece buys a
    second for half a second's wait: the slack grows by 0.5 s a piece from 1 s, so a busy
    machine's late wake-ups do not cut it off; a deadline that did not grow would."""
    recorder, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url, body_timeout_s=1.0))
    piece = MIN_BODY_RATE  # a second's worth of the minimum rate, twice a second

    def body() -> Iterator[bytes]:
        for number in range(8):
            if number:
                time.sleep(0.5)
            yield b"a" * piece

    got = httpx.post(f"{proxy.base_url}/v1/other", content=body(), timeout=GUARD_S)
    assert got.status_code == 200
    assert len(recorder.seen[-1].body) == 8 * piece


def test_a_client_leaving_mid_body_is_not_an_upstream_failure(
    upstream: Callable[..., Scripted],
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 24: a client that hung up halfway through its body was counted and logged as
    `upstream unreachable`."""

    async def handler(conn: Conn) -> None:
        await conn.until_closed()  # reads what the proxy streams until the proxy lets go

    caplog.set_level(logging.DEBUG, logger="tokenlens.proxy")
    srv = upstream(handler)
    proxy = start_proxy(ProxySettings(upstream=srv.url, max_body_bytes=10))
    for number, path in enumerate((b"/v1/messages/count_tokens", b"/v1/messages"), 1):
        sock = _connect(proxy)  # a body over max_body_bytes: streamed through
        sock.sendall(b"POST %b HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n" % path)
        sock.sendall(b"{" + b" " * 200)
        _wait_until(lambda n=number: srv.connections == n)  # its upstream request is under way
        sock.close()
    assert srv.wait_ended(2)  # the proxy dropped both upstream requests
    _wait_until(lambda: proxy.state.stats.client_gone == 2, f"{proxy.feed()}")
    assert proxy.state.stats.upstream_unreachable == 0
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]
    metrics = httpx.get(f"{proxy.base_url}/metrics").text
    assert "upstream_error" not in metrics
    assert 'outcome="pass_through",reason="client_disconnect"} 2.0' in metrics
    left = [r for r in caplog.records if "left mid-body" in r.getMessage()]
    assert [r.levelname for r in left] == ["INFO", "INFO"]  # not DEBUG: an operator sees it
    assert all("client_disconnect" in r.getMessage() for r in left)  # with its reason


def test_a_body_timeout_is_counted_and_logged_once_as_its_408(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, tmp_path: Path
) -> None:
    """A body that stopped arriving got its 408, but the request was also counted as
    `requests_total{status="499"}` and logged as `client_disconnect` (the closed
    connection read as a client that left): one refusal, one 408 line, no 499."""

    async def handler(conn: Conn) -> None:
        await conn.until_closed()  # takes whatever body is streamed to it, never answers

    srv = upstream(handler)
    access = tmp_path / "access.jsonl"
    proxy = start_proxy(
        ProxySettings(
            upstream=srv.url, body_timeout_s=0.3, max_body_bytes=10, access_log=str(access)
        )
    )
    paths = (b"/v1/messages", b"/v1/messages/count_tokens", b"/v1/other")
    for path in paths:  # buffered, then streamed through (over max_body_bytes), other route
        sock = _connect(proxy)
        sock.sendall(b"POST %b HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n" % path)
        sock.sendall(b"{" + b" " * 20)  # and then nothing
        assert _read_all(sock).startswith(b"HTTP/1.1 408 ")
        sock.close()

    def lines() -> list[dict[str, object]]:
        text = access.read_text() if access.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    _wait_until(lambda: len(lines()) == len(paths), f"{lines()}")
    assert [(line["status"], line["reason"]) for line in lines()] == [(408, "body_timeout")] * 3
    assert _refused(proxy, 408, "body_timeout") == len(paths)
    metrics = httpx.get(f"{proxy.base_url}/metrics").text
    assert 'status="499"' not in metrics
    assert "client_disconnect" not in metrics
    assert proxy.state.stats.client_gone == 0


def test_refusals_made_before_the_app_are_counted(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    """Issue 24: 400s and 431s answered before the app never reached /metrics."""
    _, upstream = recording_upstream
    proxy = start_proxy(
        ProxySettings(
            upstream=upstream.base_url,
            max_header_bytes=16 * 1024,
            max_header_count=20,
            header_timeout_s=0.5,
        )
    )
    for raw in (
        b"NOT HTTP AT ALL\r\n\r\n",  # uvicorn's own 400
        b"GET / HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 40_000,  # 431 while it arrives
        b"GET / HTTP/1.1\r\nhost: x\r\n",  # and then nothing: 408
    ):
        sock = _connect(proxy)
        with contextlib.suppress(OSError):
            sock.sendall(raw)
        assert _read_all(sock)[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 431", b"HTTP/1.1 408")
        sock.close()
    many = {f"x-h{i}": "v" for i in range(30)}
    assert httpx.get(f"{proxy.base_url}/v1/models", headers=many).status_code == 431
    assert _refused(proxy, 400, "unparsable") == 1
    assert _refused(proxy, 431, "head_too_large") == 1
    assert _refused(proxy, 408, "head_timeout") == 1
    assert _refused(proxy, 431, "header_limits") == 1


def _wait_until(condition: Callable[[], bool], context: str = "", timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"condition not reached in time {context}"
        time.sleep(0.02)

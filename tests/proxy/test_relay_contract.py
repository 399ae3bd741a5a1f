"""The relay's contract at its boundary: what a client sees for each thing an upstream does.

Each test scripts the upstream's exact bytes (`scripted.Scripted`) and talks to the proxy
over real HTTP: raw framing through httpx, the defects of issue 15 through the official
SDK, compared with what the SDK sees talking to the same upstream directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
import trustme

from tokenlens.proxy.settings import ProxySettings

from .conftest import KEY, MODEL, ProxyServer
from .scripted import (
    CHUNKED_HEAD,
    LAST_CHUNK,
    SSE_HEAD,
    Conn,
    Handler,
    Scripted,
    answering,
    chunk,
    echo_target,
    reply,
)

StartProxy = Callable[..., ProxyServer]


def _via(start_proxy: StartProxy, srv: Scripted, **settings: Any) -> ProxyServer:
    return start_proxy(ProxySettings(upstream=srv.url, **settings))


def _sdk(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=base_url, max_retries=0, timeout=20)


def _create(base_url: str, **extra: Any) -> Any:
    return _sdk(base_url).messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}], **extra
    )


MESSAGE = json.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "A whole sentence, with its end."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 8},
    }
).encode()


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return chunk(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())


SSE_START = _event(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    },
) + _event(
    "content_block_start",
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
)
SSE_HALF = _event(
    "content_block_delta",
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half a"}},
)


# --- framing --------------------------------------------------------------------------------


def test_content_length_answer_crosses_with_status_headers_and_body(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    answer_headers = [
        (b"Content-Type", b"application/json"),
        (b"X-Request-Id", b"req_1"),
        (b"x-multi", b"one"),
        (b"X-Multi", b"two"),
    ]
    srv = upstream(answering(lambda _: reply(201, b'{"id":"msg_01"}', answer_headers)))
    proxy = _via(start_proxy, srv)
    body = b'{"model":"m","messages":[]}'
    got = httpx.post(
        f"{proxy.base_url}/v1/messages?beta=true",
        content=body,
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    assert got.status_code == 201
    assert got.content == b'{"id":"msg_01"}'
    assert got.headers.get_list("x-multi") == ["one", "two"]
    assert got.headers["x-request-id"] == "req_1"
    [seen] = srv.requests
    assert (seen.method, seen.target, seen.body) == (b"POST", b"/v1/messages?beta=true", body)
    # only what the client sent crosses, once each (aiohttp adds no user-agent, accept,
    # accept-encoding or content-type of its own); `connection` is hop-by-hop
    names = sorted(name.lower() for name, _ in seen.headers)
    assert names == [
        b"accept",
        b"accept-encoding",
        b"anthropic-version",
        b"content-length",
        b"host",
        b"user-agent",
        b"x-api-key",
    ]
    assert (
        seen.get(
            b"user-agent",
        )
        == got.request.headers["user-agent"].encode()
    )


def test_chunked_and_read_until_close_answers_arrive_whole(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    pieces = [b"event: a\n", b"data: {}\n\n", b"x" * 5000, b"end"]

    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            if request.target == b"/chunked":
                await conn.send(CHUNKED_HEAD + b"".join(chunk(p) for p in pieces))
                await conn.send(b"5;ext=1\r\nfinal\r\n" + LAST_CHUNK)
            elif request.target == b"/until-close":  # no length, no chunking
                await conn.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nfirst, ")
                await asyncio.sleep(0.02)
                await conn.send(b"second")
                return  # the body ends with the connection
            else:
                await conn.send(echo_target(request))

    proxy = _via(start_proxy, upstream(handler))
    with httpx.Client(base_url=proxy.base_url) as client:
        assert client.get("/chunked").content == b"".join(pieces) + b"final"
        assert client.get("/after").content == b"echo /after"
        assert client.get("/until-close").content == b"first, second"


@pytest.mark.parametrize("status", [204, 304])
def test_bodiless_answers(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, status: int
) -> None:
    srv = upstream(answering(lambda _: reply(status, length=False, reason=b"X")))
    proxy = _via(start_proxy, srv)
    with httpx.Client(base_url=proxy.base_url) as client:
        for _ in range(3):
            got = client.get("/x")
            assert (got.status_code, got.content) == (status, b"")
    assert srv.connections == 1  # kept alive


def test_interim_answers_are_skipped(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
    srv = upstream(answering(lambda _: interim + reply(200, b"real", [(b"x-final", b"1")])))
    got = httpx.post(f"{_via(start_proxy, srv).base_url}/x", content=b"payload")
    assert (got.status_code, got.content, got.headers["x-final"]) == (200, b"real", "1")
    assert "link" not in got.headers


@pytest.mark.parametrize("wrongly", [False, True], ids=["proper", "body-sent-anyway"])
def test_head_answers_end_at_their_head(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, wrongly: bool
) -> None:
    """No waiting for a body that never comes; and a body wrongly sent after a HEAD answer
    never reaches anyone (aiohttp reads it as garbage: that answer is a 502)."""

    def respond(request: Any) -> bytes:
        if request.method == b"HEAD":
            return b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n" + (b"0123456789" * wrongly)
        return reply(body=b"get")

    srv = upstream(answering(respond))
    proxy = _via(start_proxy, srv, upstream_timeout_s=5.0)
    with httpx.Client(base_url=proxy.base_url, timeout=2.0) as client:
        head = client.head("/file")  # well under the read timeout: no waiting for a body
        assert head.content == b""
        if not wrongly:
            assert (head.status_code, head.headers["content-length"]) == (200, "10")
        for _ in range(2):
            assert client.get("/file").content == b"get"


def test_request_bodies_keep_their_framing(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    srv = upstream(answering(lambda r: reply(body=r.body[::-1])))
    proxy = _via(start_proxy, srv)

    def pieces() -> Iterator[bytes]:
        yield from (b"abc", b"defg", b"h" * 70000)

    with httpx.Client(base_url=proxy.base_url) as client:
        streamed = client.post("/up", content=pieces())  # chunked from the client
        assert streamed.content == (b"abcdefg" + b"h" * 70000)[::-1]
        sized = client.post("/up", content=b"abcdefg")
        assert sized.content == b"gfedcba"
        empty = client.post("/empty")
        assert empty.status_code == 200
    chunked, with_length, no_body = srv.requests
    assert (
        chunked.get(b"transfer-encoding") == b"chunked" and chunked.get(b"content-length") is None
    )
    assert with_length.get(b"content-length") == b"7"
    assert no_body.get(b"content-length") == b"0"


def test_an_early_answer_stops_the_upload(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    async def handler(conn: Conn) -> None:
        await conn.reader.readuntil(b"\r\n\r\n")  # the head only, then refuse at once
        await conn.send(reply(413, b"too large", reason=b"Payload Too Large"))
        await conn.until_closed()

    proxy = _via(start_proxy, upstream(handler))
    sent = 0

    def slow_body() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(100):
            sent += 1
            yield b"x" * 1000
            time.sleep(0.01)

    got = httpx.post(f"{proxy.base_url}/big", content=slow_body(), timeout=10)
    assert (got.status_code, got.content) == (413, b"too large")


# --- garbage and faults ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOT HTTP\r\n\r\n",
        b"HTTP/1.1 abc nonsense\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
    ],
)
def test_garbage_from_the_upstream_is_a_502(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, garbage: bytes
) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(garbage)
        await conn.until_closed()  # and keep the connection open

    proxy = _via(start_proxy, upstream(handler), upstream_timeout_s=30.0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        _create(proxy.base_url)
    assert caught.value.status_code == 502  # on the bytes: the read timeout would be a 504


def test_an_unasked_101_is_a_502(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """Issue 15: a `101` used to be relayed as a malformed answer (101 + chunked)."""

    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n"
        )
        await conn.until_closed()

    srv = upstream(handler)
    proxy = _via(start_proxy, srv)
    with pytest.raises(anthropic.APIStatusError) as caught:
        _create(proxy.base_url)
    assert caught.value.status_code == 502
    assert "101" in caught.value.body["error"]["message"]
    assert srv.wait_ended()  # and the switched connection was dropped


def test_no_answer_within_the_read_timeout_is_a_504(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.until_closed()  # never answers

    srv = upstream(handler)
    proxy = _via(start_proxy, srv, upstream_timeout_s=0.5)
    with pytest.raises(anthropic.APIStatusError) as caught:
        _create(proxy.base_url)
    assert caught.value.status_code == 504
    assert len(srv.requests) == 1  # not retried


def test_connect_timeout_is_a_504(start_proxy: StartProxy) -> None:
    with _full_backlog() as port:
        proxy = start_proxy(
            ProxySettings(upstream=f"http://127.0.0.1:{port}", connect_timeout_s=0.3)
        )
        # the whole upstream timeout (600 s) would outlast the client's: only the connect
        # timeout answers in time
        got = httpx.get(f"{proxy.base_url}/v1/models", timeout=60)
        assert got.status_code == 504


class _full_backlog:
    """A listening port whose accept queue is full: a new connect hangs in SYN retries."""

    def __enter__(self) -> int:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        port: int = self.listener.getsockname()[1]
        self.fillers = []
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            self.fillers.append(filler)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        time.sleep(0.05)
        return port

    def __exit__(self, *exc: object) -> None:
        for filler in self.fillers:
            filler.close()
        self.listener.close()


# --- truncation: a broken upstream answer is a broken answer for the client ---------------------


def _cut_after(first: bytes, *, stall: bool = False) -> Handler:
    """Answer with `first`, then hang up (or stall) short of what was promised."""

    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(first)
        if stall:
            await conn.until_closed()

    return handler


CUT_JSON = {
    "content-length": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n%b" % (len(MESSAGE), MESSAGE[: len(MESSAGE) // 2]),
    "chunked": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"transfer-encoding: chunked\r\n\r\n" + chunk(MESSAGE[: len(MESSAGE) // 2]),
}


def _error_of(call: Callable[[], Any]) -> type[BaseException]:
    try:
        result = call()
    except Exception as exc:
        return type(exc)
    raise AssertionError(f"no error: the client got {result!r}")


@pytest.mark.parametrize("framing", sorted(CUT_JSON))
def test_a_cut_json_answer_fails_as_it_does_direct(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, framing: str
) -> None:
    """Issue 15: a cut body used to arrive as a clean 200 (JSONDecodeError in the SDK)."""
    srv = upstream(_cut_after(CUT_JSON[framing]))
    proxy = _via(start_proxy, srv)
    direct = _error_of(lambda: _create(srv.url))
    via = _error_of(lambda: _create(proxy.base_url))
    assert via is direct is anthropic.APIConnectionError
    assert proxy.feed()["upstream_broken"] == 1


def test_a_cut_sse_stream_fails_as_it_does_direct(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """Issue 15: the SDK's stream used to just stop, and get_final_message returned half a
    sentence with stop_reason None."""
    srv = upstream(_cut_after(SSE_HEAD + SSE_START + SSE_HALF))
    proxy = _via(start_proxy, srv)

    def events(base_url: str) -> list[str]:
        return [event.type for event in _create(base_url, stream=True)]

    def final(base_url: str) -> Any:
        with _sdk(base_url).messages.stream(
            model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            return stream.get_final_message()

    for call in (events, final):
        direct = _error_of(lambda: call(srv.url))  # noqa: B023 (called at once)
        via = _error_of(lambda: call(proxy.base_url))  # noqa: B023
        assert via is direct, call.__name__
    assert proxy.feed()["upstream_broken"] == 2


@pytest.mark.parametrize("answer", ["sse", "chunked-json", "content-length-json"])
def test_a_stall_mid_answer_breaks_the_clients_answer_at_the_read_timeout(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, answer: str
) -> None:
    first = {
        "sse": SSE_HEAD + SSE_START + SSE_HALF,
        "chunked-json": CUT_JSON["chunked"],
        "content-length-json": CUT_JSON["content-length"],
    }[answer]
    srv = upstream(_cut_after(first, stall=True))
    proxy = _via(start_proxy, srv, upstream_timeout_s=0.5)
    stream = answer == "sse"

    def call() -> Any:
        result = _create(proxy.base_url, stream=stream)
        return [event.type for event in result] if stream else result

    error = _error_of(call)  # the SDK's connection error, or httpx's from inside a stream
    assert issubclass(error, anthropic.APIConnectionError) or "RemoteProtocolError" in str(error)
    # broken by the proxy's read timeout (a client that gave up first is not counted here)
    assert proxy.state.stats.upstream_broken == 1
    assert srv.wait_ended()  # the proxy hung up on the stalled upstream


# --- keep-alive and stale connections -----------------------------------------------------------


def test_sequential_requests_share_one_upstream_connection(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    srv = upstream(answering(echo_target))
    with httpx.Client(base_url=_via(start_proxy, srv).base_url) as client:
        for i in range(10):
            assert client.get(f"/n/{i}").content == f"echo /n/{i}".encode()
    assert srv.connections == 1


def test_connection_close_answers_are_not_reused(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    # says `connection: close` but keeps the socket open: the proxy must not reuse it
    srv = upstream(answering(lambda _: reply(body=b"bye", headers=[(b"Connection", b"close")])))
    with httpx.Client(base_url=_via(start_proxy, srv).base_url) as client:
        assert client.get("/").content == b"bye"
        assert client.get("/").content == b"bye"
    assert srv.connections == 2


def _answers_once_then_drops_the_next() -> Handler:
    """Connection 0 answers one request, reads the next one and hangs up unanswered."""

    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(reply(body=b"first"))
            await conn.read_request()
        else:
            await conn.answer_all(lambda r: reply(body=b"fresh " + r.body))

    return handler


def test_a_stale_connection_retries_a_get_but_never_replays_a_post(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    srv = upstream(_answers_once_then_drops_the_next())
    with httpx.Client(base_url=_via(start_proxy, srv).base_url) as client:
        assert client.get("/").content == b"first"
        assert client.get("/again").content == b"fresh "  # replayed on a fresh connection
    assert [(r.method, r.connection) for r in srv.requests] == [
        (b"GET", 0),
        (b"GET", 0),
        (b"GET", 1),
    ]
    srv = upstream(_answers_once_then_drops_the_next())
    with httpx.Client(base_url=_via(start_proxy, srv).base_url) as client:
        assert client.get("/").content == b"first"
        assert client.post("/v1/messages", content=b"payload").status_code == 502
        assert client.post("/v1/messages", content=b"later").content == b"fresh later"
    assert [r.body for r in srv.requests].count(b"payload") == 1  # the upstream saw it once


def test_an_idle_connection_the_upstream_closed_is_not_used(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    async def handler(conn: Conn) -> None:
        request = await conn.read_request()
        assert request is not None
        await conn.send(reply(body=b"once " + request.body))
        # returning hangs up the idle kept-alive connection

    srv = upstream(handler)
    with httpx.Client(base_url=_via(start_proxy, srv).base_url) as client:
        assert client.post("/", content=b"a").content == b"once a"
        assert srv.wait_ended()
        time.sleep(0.05)
        assert client.post("/", content=b"b").content == b"once b"
    assert [r.body for r in srv.requests] == [b"a", b"b"]


def test_bytes_after_the_end_of_an_answer_are_not_part_of_any_answer(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """A second, unasked answer right behind the first must not leak into the next one."""

    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            await conn.send(
                reply(body=b"ok " + request.target, headers=[(b"x-n", b"1")])
                + reply(body=b"SMUGGLED", headers=[(b"x-n", b"2")])
            )

    srv = upstream(handler)
    with httpx.Client(base_url=_via(start_proxy, srv).base_url) as client:
        for i in range(3):
            got = client.get(f"/{i}")
            assert (got.content, got.headers["x-n"]) == (f"ok /{i}".encode(), "1")


# --- back-pressure ---------------------------------------------------------------------------


def test_a_slow_reader_holds_the_upstream_back(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """The proxy does not read the whole answer into memory ahead of its client."""
    piece = 64 * 1024
    pieces = 512  # 32 MiB
    data = random.Random(11).randbytes(piece)
    written: list[int] = []

    async def handler(conn: Conn) -> None:
        await conn.read_request()
        sock = conn.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        await conn.send(CHUNKED_HEAD)
        for _ in range(pieces):
            await conn.send(chunk(data))
            written.append(piece)
        await conn.send(LAST_CHUNK)

    srv = upstream(handler)
    proxy = _via(start_proxy, srv)
    with httpx.Client(timeout=30) as client, client.stream("GET", f"{proxy.base_url}/big") as got:
        time.sleep(1.0)  # not reading: the upstream must be held back
        held = sum(written)
        received = sum(len(part) for part in got.iter_raw())
    assert received == piece * pieces  # then it all arrives, intact in size
    assert held < piece * pieces // 2, f"{held} of {piece * pieces} bytes written unread"


# --- cancellation -----------------------------------------------------------------------------


def test_a_client_leaving_before_the_answer_starts_cancels_the_upstream_request(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """Issue 15: the upstream connection used to be held until the answer came (or 600 s),
    while the upstream went on generating tokens nobody would read."""
    arrived = []

    async def handler(conn: Conn) -> None:
        request = await conn.read_request()
        arrived.append(request)
        await conn.until_closed()  # "generating" until the proxy hangs up

    srv = upstream(handler)
    proxy = _via(start_proxy, srv)
    with pytest.raises((anthropic.APITimeoutError, anthropic.APIConnectionError)):
        anthropic.Anthropic(
            api_key=KEY, base_url=proxy.base_url, max_retries=0, timeout=0.5
        ).messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "hi"}])
    assert arrived, "the request never reached the upstream"
    assert srv.wait_ended(timeout=5), "the upstream request was not cancelled"
    proxy.wait_idle()
    assert proxy.feed()["client_gone"] == 1


# --- TLS to the upstream ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, Path]:
    """A throwaway CA and its PEM file."""
    ca = trustme.CA()
    pem = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(pem))
    return ca, pem


@pytest.fixture(scope="module")
def tls(tls_ca: tuple[trustme.CA, Path]) -> tuple[ssl.SSLContext, Path]:
    """A server context for 127.0.0.1 and localhost, and the CA's PEM file."""
    ca, pem = tls_ca
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server)
    return server, pem


def test_tls_upstream_trusted_through_ssl_cert_file(
    upstream: Callable[..., Scripted],
    start_proxy: StartProxy,
    tls: tuple[ssl.SSLContext, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, pem = tls
    srv = upstream(answering(echo_target), server)
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    proxy = start_proxy(ProxySettings(upstream=f"https://localhost:{srv.port}/api"))
    with httpx.Client(base_url=proxy.base_url) as client:
        for i in range(3):
            assert client.get(f"/r/{i}").content == f"echo /api/r/{i}".encode()
    assert srv.connections == 1
    assert srv.requests[0].get(b"host") == f"localhost:{srv.port}".encode()


def test_tls_upstream_with_an_untrusted_certificate_is_refused(
    upstream: Callable[..., Scripted],
    start_proxy: StartProxy,
    tls: tuple[ssl.SSLContext, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _ = tls
    srv = upstream(answering(echo_target), server)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the system CAs, not ours
    proxy = start_proxy(ProxySettings(upstream=f"https://localhost:{srv.port}"))
    got = httpx.get(f"{proxy.base_url}/v1/models")
    assert got.status_code == 502
    assert "Certificate" in got.json()["error"]["message"]
    assert srv.requests == []


def test_tls_upstream_with_a_certificate_for_another_host_is_refused(
    upstream: Callable[..., Scripted],
    start_proxy: StartProxy,
    tls_ca: tuple[trustme.CA, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ca, pem = tls_ca
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.example.org").configure_cert(server)  # trusted CA, wrong name
    srv = upstream(answering(echo_target), server)
    monkeypatch.setenv("SSL_CERT_FILE", str(pem))
    proxy = start_proxy(ProxySettings(upstream=f"https://localhost:{srv.port}"))
    got = httpx.get(f"{proxy.base_url}/v1/models")
    assert got.status_code == 502
    assert "Certificate" in got.json()["error"]["message"]
    assert srv.requests == []

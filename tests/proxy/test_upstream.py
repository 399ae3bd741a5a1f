"""The relay's own HTTP/1.1 client (`tokenlens.proxy.upstream`) against scripted servers.

Why raw asyncio servers and not a web framework: each test writes the exact bytes of the
answer (framing, interim answers, faults, garbage), counts the connections it accepted and
records every request it parsed, so keep-alive, retries and back-pressure are observable.
Each scenario runs on plain asyncio and on uvloop (production runs on uvloop).
"""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import trustme
import uvloop

from tokenlens.proxy.upstream import (
    HIGH_WATER,
    LOW_WATER,
    TIMEOUT_ERRORS,
    UPSTREAM_ERRORS,
    Upstream,
    UpstreamError,
    UpstreamResponse,
    UpstreamTimeout,
    header,
)

T = TypeVar("T")
Headers = list[tuple[bytes, bytes]]
Run = Callable[[Coroutine[Any, Any, T]], T]

#: A scenario that hangs (a bug) fails after this long instead of blocking the suite.
GUARD_S = 5.0
#: Short enough to keep the suite fast, long enough for a loaded 2-core machine.
SHORT_TIMEOUT_S = 0.3
#: The most one read of the event loop's transport hands over at once (asyncio and uvloop).
MAX_READ = 256 * 1024


# --- running a scenario on either event loop ------------------------------------------------


def _runner(loop_kind: str) -> Run[Any]:
    factory = uvloop.new_event_loop if loop_kind == "uvloop" else None

    def run(coro: Coroutine[Any, Any, T]) -> T:
        async def guarded() -> T:
            async with asyncio.timeout(GUARD_S):
                return await coro

        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(guarded())

    return run


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest) -> Run[Any]:
    return _runner(request.param)


# --- a scripted HTTP/1.1 server -------------------------------------------------------------


@dataclass
class Request:
    """One request as the server parsed it off the wire."""

    method: bytes
    target: bytes
    headers: Headers
    body: bytes
    connection: int

    def get(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


class Conn:
    """The server side of one accepted connection."""

    def __init__(
        self, server: Server, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.index = index
        self.reader = reader
        self.writer = writer

    async def read_request(self) -> Request | None:
        """The next request (body de-chunked), or None at a clean end of the stream."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise
            return None
        lines = head[:-4].split(b"\r\n")
        method, target, _version = lines[0].split(b" ")
        headers: Headers = []
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers.append((name, value.strip()))
        request = Request(method, target, headers, b"", self.index)
        length = request.get(b"content-length")
        if request.get(b"transfer-encoding") == b"chunked":
            request.body = await self._read_chunked()
        elif length is not None:
            request.body = await self.reader.readexactly(int(length))
        self.server.requests.append(request)
        return request

    async def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # no trailers: the final empty line
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            if await self.reader.readexactly(2) != b"\r\n":
                raise AssertionError("chunk not followed by CRLF")

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer_all(self, respond: Callable[[Request], bytes]) -> None:
        """Answer every further request on this connection until the client hangs up."""
        while (request := await self.read_request()) is not None:
            await self.send(respond(request))


Handler = Callable[[Conn], Awaitable[None]]


class Server:
    """An asyncio server on 127.0.0.1 whose every connection runs `handler`."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.connections = 0
        self.requests: list[Request] = []
        self.ended: list[int] = []  # connections whose handler returned
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()
        await asyncio.sleep(0.01)  # let the transports finish closing

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self.handler(Conn(self, index, reader, writer))
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, ValueError):
            # ValueError: the client sent bytes that are not a request (a failing test)
            pass
        finally:
            self.ended.append(index)
            writer.close()
            self._tasks.discard(task)


def answering(respond: Callable[[Request], bytes]) -> Handler:
    async def handler(conn: Conn) -> None:
        await conn.answer_all(respond)

    return handler


def reply(
    status: int = 200,
    body: bytes = b"",
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    reason: bytes = b"OK",
    length: bool = True,
) -> bytes:
    """An answer's bytes; `content-length` last unless `length` is False."""
    lines = [b"HTTP/1.1 %d %b\r\n" % (status, reason)]
    lines += [b"%b: %b\r\n" % pair for pair in headers]
    if length:
        lines.append(b"content-length: %d\r\n" % len(body))
    return b"".join([*lines, b"\r\n", body])


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"


def echo_target(request: Request) -> bytes:
    return reply(body=b"echo " + request.target)


# --- the client side ------------------------------------------------------------------------


@asynccontextmanager
async def upstream(base: str, **kwargs: Any) -> AsyncIterator[Upstream]:
    kwargs.setdefault("timeout_s", 2.0)
    up = Upstream(base, **kwargs)
    try:
        yield up
    finally:
        await up.aclose()
        await asyncio.sleep(0.01)  # let closed transports call connection_lost


async def read_body(response: UpstreamResponse) -> bytes:
    return b"".join([part async for part in response.aiter_raw()])


async def reading_past_the_first_chunk(
    response: UpstreamResponse,
) -> tuple[asyncio.Task[None], list[bytes]]:
    """A task reading `response` into a list, returned once it waits for the next bytes."""
    got: list[bytes] = []
    first_seen = asyncio.Event()

    async def reader() -> None:
        async for part in response.aiter_raw():
            got.append(part)
            first_seen.set()

    task = asyncio.create_task(reader())
    await asyncio.wait_for(first_seen.wait(), 1.0)
    await asyncio.sleep(0.02)  # the reader now waits for the next bytes
    return task, got


async def fetch(
    up: Upstream,
    method: str = "GET",
    target: bytes = b"/",
    headers: Headers | None = None,
    content: bytes | AsyncIterator[bytes] = b"",
) -> tuple[int, Sequence[tuple[bytes, bytes]], bytes]:
    response = await up.send(method, target, headers or [], content)
    try:
        return response.status, response.headers, await read_body(response)
    finally:
        await response.aclose()


async def stream_of(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        await asyncio.sleep(0)
        yield part


# --- 1. a content-length answer -------------------------------------------------------------


def test_content_length_answer_and_the_request_on_the_wire(run: Run[None]) -> None:
    answer_headers = [
        (b"Content-Type", b"application/json"),
        (b"X-Request-Id", b"req_1"),
        (b"x-multi", b"one"),
        (b"X-Multi", b"two"),
        (b"Content-Length", b"16"),
    ]

    async def scenario() -> None:
        async with (
            Server(
                answering(
                    lambda _: reply(
                        201, b'{"id":"msg_01"}\n', answer_headers, reason=b"Created", length=False
                    )
                )
            ) as srv,
            upstream(srv.url) as up,
        ):
            sent = [(b"X-Api-Key", b"sk-test"), (b"anthropic-version", b"2023-06-01")]
            body = b'{"model":"m","messages":[]}'
            status, headers, got = await fetch(up, "POST", b"/v1/messages?beta=true", sent, body)
        assert status == 201
        assert list(headers) == answer_headers  # names as sent, order and repeats kept
        assert got == b'{"id":"msg_01"}\n'
        [request] = srv.requests
        assert request.method == b"POST"
        assert request.target == b"/v1/messages?beta=true"
        assert request.headers == [
            (b"host", f"127.0.0.1:{srv.port}".encode()),
            *sent,
            (b"content-length", str(len(body)).encode()),
        ]
        assert request.body == body

    run(scenario())


def test_empty_bodies_get_the_framing_their_method_needs(run: Run[None]) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target)) as srv, upstream(srv.url) as up:
            for method in ("GET", "POST", "DELETE", "PUT"):
                status, _, _ = await fetch(up, method, b"/" + method.encode())
                assert status == 200
        framing = {
            r.method: [(name.lower(), value) for name, value in r.headers[1:]] for r in srv.requests
        }
        assert framing == {
            b"GET": [],
            b"POST": [(b"content-length", b"0")],
            b"DELETE": [],
            b"PUT": [(b"content-length", b"0")],
        }

    run(scenario())


# --- 2. keep-alive --------------------------------------------------------------------------


def test_sequential_requests_share_one_connection(run: Run[None]) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target)) as srv, upstream(srv.url) as up:
            for i in range(20):
                target = b"/n/%d" % i
                status, _, body = await fetch(up, "GET", target)
                assert (status, body) == (200, b"echo " + target)
                assert up.open_connections == 1
        assert srv.connections == 1
        assert [r.connection for r in srv.requests] == [0] * 20

    run(scenario())


def test_connection_close_answer_is_not_reused(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        # Says `connection: close` but keeps the socket open: the client must not reuse it.
        await conn.answer_all(lambda r: reply(body=b"bye", headers=[(b"Connection", b"close")]))

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            assert (await fetch(up))[2] == b"bye"
            assert up.open_connections == 0
            assert (await fetch(up))[2] == b"bye"
        assert srv.connections == 2
        assert [r.connection for r in srv.requests] == [0, 1]

    run(scenario())


def test_concurrent_requests_each_get_their_own_answer(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            await asyncio.sleep(0.001 * (int(request.target.rsplit(b"/", 1)[1]) % 4))
            await conn.send(echo_target(request))

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            targets = [b"/c/%d" % i for i in range(12)]
            results = await asyncio.gather(*(fetch(up, "GET", t) for t in targets))
            assert [body for _, _, body in results] == [b"echo " + t for t in targets]
            assert up.open_connections == srv.connections <= 12
            again = await asyncio.gather(*(fetch(up, "GET", t) for t in targets[:3]))
            assert [body for _, _, body in again] == [b"echo " + t for t in targets[:3]]
            assert srv.connections == up.open_connections  # the kept ones were reused

    run(scenario())


def test_max_keepalive_bounds_the_idle_pool(run: Run[None]) -> None:
    async def scenario() -> None:
        arrived = asyncio.Event()

        async def handler(conn: Conn) -> None:
            while (request := await conn.read_request()) is not None:
                if len(conn.server.requests) >= 3:
                    arrived.set()
                await asyncio.wait_for(arrived.wait(), 2)  # hold until 3 connections are open
                await conn.send(echo_target(request))

        async with Server(handler) as srv, upstream(srv.url, max_keepalive=1) as up:
            await asyncio.gather(*(fetch(up, "GET", b"/k/%d" % i) for i in range(3)))
            assert srv.connections == 3
            assert up.open_connections == 1
            await fetch(up)
            await fetch(up)
            assert srv.connections == 3

    run(scenario())


def test_upstream_aclose_closes_idle_connections(run: Run[None]) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target)) as srv:
            up = Upstream(srv.url, timeout_s=2.0)
            await fetch(up)
            await fetch(up)
            assert up.open_connections == 1
            await up.aclose()
            assert up.open_connections == 0
            for _ in range(100):  # the server sees the hang-up
                if srv.ended:
                    break
                await asyncio.sleep(0.01)
            assert srv.ended == [0]

    run(scenario())


def test_double_aclose_does_not_pool_the_connection_twice(run: Run[None]) -> None:
    """`aclose` is called from `finally` blocks that may overlap: it must be idempotent."""

    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            await asyncio.sleep(0.01)
            await conn.send(echo_target(request))

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=0.5) as up:
            response = await up.send("GET", b"/first", [], b"")
            assert await read_body(response) == b"echo /first"
            await response.aclose()
            await response.aclose()
            results = await asyncio.gather(
                fetch(up, "GET", b"/a"), fetch(up, "GET", b"/b"), return_exceptions=True
            )
            assert results == [
                (200, [(b"content-length", b"7")], b"echo /a"),
                (200, [(b"content-length", b"7")], b"echo /b"),
            ]
            assert srv.connections == 2  # one kept-alive, one fresh: never shared

    run(scenario())


def test_a_late_second_aclose_does_not_release_the_next_exchange(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n")
            await asyncio.sleep(0.05)
            await conn.send(request.target[1:5].ljust(4, b"."))

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=0.5) as up:
            first = await up.send("GET", b"/one", [], b"")
            assert await read_body(first) == b"one."
            await first.aclose()
            second = await up.send("GET", b"/two", [], b"")  # reuses the connection
            await first.aclose()  # stale handle closed again, e.g. by a second finally
            assert await read_body(second) == b"two."
            await second.aclose()
            assert srv.connections == 1

    run(scenario())


# --- 3. chunked answers -----------------------------------------------------------------------


def test_chunked_answer_is_reassembled_and_the_connection_reused(run: Run[None]) -> None:
    pieces = [b"event: a\n", b"data: {}\n\n", b"x" * 5000, b"end"]

    async def handler(conn: Conn) -> None:
        while await conn.read_request() is not None:
            await conn.send(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for piece in pieces:
                await conn.send(chunk(piece))
            await conn.send(b"5;ext=1\r\nfinal\r\n" + LAST_CHUNK)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            for _ in range(2):
                status, headers, body = await fetch(up)
                assert status == 200
                assert header(headers, b"transfer-encoding") == "chunked"
                assert body == b"".join(pieces) + b"final"
        assert srv.connections == 1

    run(scenario())


def test_chunked_answer_streams_each_chunk_as_it_arrives(run: Run[None]) -> None:
    async def scenario() -> None:
        go_on = asyncio.Event()

        async def handler(conn: Conn) -> None:
            await conn.read_request()
            await conn.send(CHUNKED_HEAD + chunk(b"chunk one"))
            await asyncio.wait_for(go_on.wait(), 3)  # only once the client saw chunk one
            await conn.send(chunk(b"chunk two") + LAST_CHUNK)
            await conn.answer_all(echo_target)

        async with Server(handler) as srv, upstream(srv.url) as up:
            response = await up.send("GET", b"/stream", [], b"")
            chunks = response.aiter_raw()
            first = await asyncio.wait_for(anext(chunks), 1.0)
            assert first == b"chunk one"
            assert not response.complete
            go_on.set()
            rest = b"".join([part async for part in chunks])
            assert rest == b"chunk two"
            await response.aclose()
            assert (await fetch(up))[2] == b"echo /"
        assert srv.connections == 1

    run(scenario())


# --- 4. an answer delimited by the end of the connection --------------------------------------


def test_read_until_close_answer(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nfirst half, ")
        await asyncio.sleep(0.02)
        await conn.send(b"second half")
        # returning closes the connection: the end of the body

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            assert await fetch(up) == (
                200,
                [(b"content-type", b"text/plain")],
                b"first half, second half",
            )
            assert up.open_connections == 0
            assert (await fetch(up))[2] == b"first half, second half"
        assert srv.connections == 2

    run(scenario())


@pytest.mark.parametrize("status", [204, 304])
def test_bodiless_status_needs_no_length_and_keeps_the_connection(
    run: Run[None], status: int
) -> None:
    async def scenario() -> None:
        respond = answering(lambda _: reply(status, length=False, reason=b"X"))
        async with Server(respond) as srv, upstream(srv.url) as up:
            for _ in range(3):
                assert await fetch(up) == (status, [], b"")
        assert srv.connections == 1

    run(scenario())


# --- 5. interim answers -------------------------------------------------------------------------


@pytest.mark.parametrize("split", [False, True], ids=["one-write", "separate-writes"])
def test_interim_answers_are_skipped(run: Run[None], split: bool) -> None:
    final = reply(200, b"real", [(b"x-final", b"1")])

    async def handler(conn: Conn) -> None:
        while await conn.read_request() is not None:
            interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
            if split:
                await conn.send(interim)
                await asyncio.sleep(0.02)
                await conn.send(final)
            else:
                await conn.send(interim + final)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            for _ in range(2):
                status, headers, body = await fetch(up, "POST", b"/", None, b"payload")
                assert (status, list(headers), body) == (
                    200,
                    [(b"x-final", b"1"), (b"content-length", b"4")],
                    b"real",
                )
        assert srv.connections == 1

    run(scenario())


# --- 6. HEAD ----------------------------------------------------------------------------------


def test_head_answer_with_a_length_has_no_body(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            if request.method == b"HEAD":
                await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n")
            else:
                await conn.send(echo_target(request))

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            async with asyncio.timeout(1.0):  # well under the read timeout: no waiting
                status, headers, body = await fetch(up, "HEAD", b"/file")
            assert (status, list(headers), body) == (200, [(b"content-length", b"10")], b"")
            assert (await fetch(up, "GET", b"/after"))[2] == b"echo /after"
        head_request = srv.requests[0]
        assert [name for name, _ in head_request.headers] == [b"host"]

    run(scenario())


# --- 7. streamed request bodies ----------------------------------------------------------------


def test_streamed_body_without_length_goes_chunked(run: Run[None]) -> None:
    async def scenario() -> None:
        async with (
            Server(answering(lambda r: reply(body=r.body[::-1]))) as srv,
            upstream(srv.url) as up,
        ):
            body = stream_of(b"abc", b"", b"defg", b"h" * 70000)
            status, _, got = await fetch(up, "POST", b"/up", [(b"x-a", b"1")], body)
            assert (status, got) == (200, (b"abcdefg" + b"h" * 70000)[::-1])
            assert (await fetch(up, "GET", b"/next"))[0] == 200  # framing ended cleanly
        first = srv.requests[0]
        assert first.get(b"transfer-encoding") == b"chunked"
        assert first.get(b"content-length") is None
        assert first.body == b"abcdefg" + b"h" * 70000
        assert srv.connections == 1

    run(scenario())


def test_streamed_body_with_length_goes_raw(run: Run[None]) -> None:
    async def scenario() -> None:
        async with Server(answering(lambda r: reply(body=r.body))) as srv, upstream(srv.url) as up:
            given = [(b"Content-Length", b"7"), (b"x-a", b"1")]
            status, _, got = await fetch(up, "POST", b"/up", given, stream_of(b"abc", b"defg"))
            assert (status, got) == (200, b"abcdefg")
            assert (await fetch(up, "GET", b"/next"))[0] == 200  # no stray bytes left
        first = srv.requests[0]
        assert first.headers == [(b"host", f"127.0.0.1:{srv.port}".encode()), *given]
        assert first.body == b"abcdefg"
        assert srv.connections == 1

    run(scenario())


def test_streamed_body_framing_is_decided_by_the_framing_headers_only(run: Run[None]) -> None:
    """A header *value* (or the target) that mentions transfer-encoding changes nothing."""

    async def scenario() -> None:
        async with Server(answering(lambda r: reply(body=r.body))) as srv, upstream(srv.url) as up:
            given = [(b"content-length", b"7"), (b"x-note", b"no transfer-encoding here")]
            _, _, got = await fetch(up, "POST", b"/up", given, stream_of(b"abc", b"defg"))
        assert srv.requests[0].body == b"abcdefg"
        assert got == b"abcdefg"

    run(scenario())


def test_early_answer_stops_the_body_and_drops_the_connection(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.reader.readuntil(b"\r\n\r\n")  # the head only, then refuse at once
            await conn.send(reply(413, b"too large", reason=b"Payload Too Large"))
            await conn.reader.read()  # whatever else comes, until the client hangs up
        else:
            await conn.answer_all(echo_target)

    async def scenario() -> None:
        yielded = 0

        async def slow_body() -> AsyncIterator[bytes]:
            nonlocal yielded
            for _ in range(100):
                yielded += 1
                yield b"x" * 1000
                await asyncio.sleep(0.01)

        async with Server(handler) as srv, upstream(srv.url) as up:
            headers = [(b"content-length", b"100000")]
            status, _, body = await fetch(up, "POST", b"/big", headers, slow_body())
            assert (status, body) == (413, b"too large")
            assert yielded < 100  # stopped sending once the answer came
            assert up.open_connections == 0  # a half-sent request poisons the connection
            assert (await fetch(up, "GET", b"/next"))[2] == b"echo /next"
        assert srv.connections == 2

    run(scenario())


# --- 8. faults ------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_connection_refused_is_an_upstream_error_not_a_timeout(run: Run[None]) -> None:
    async def scenario() -> None:
        async with upstream(f"http://127.0.0.1:{_closed_port()}", timeout_s=3.0) as up:
            with pytest.raises(UpstreamError) as caught:
                await up.send("GET", b"/", [], b"")
            assert not isinstance(caught.value, TIMEOUT_ERRORS)
            assert isinstance(caught.value, UPSTREAM_ERRORS)
            assert isinstance(caught.value.__cause__, ConnectionRefusedError)
            assert up.open_connections == 0

    run(scenario())


def test_no_answer_times_out(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await asyncio.sleep(GUARD_S)  # never answers

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=SHORT_TIMEOUT_S) as up:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(UpstreamTimeout):
                await up.send("POST", b"/v1/messages", [], b"{}")
            elapsed = loop.time() - started
            assert SHORT_TIMEOUT_S * 0.9 <= elapsed < SHORT_TIMEOUT_S + 1.5
            assert up.open_connections == 0
        assert len(srv.requests) == 1  # not retried

    run(scenario())


def test_stall_mid_body_times_out_in_aiter_raw(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
        await asyncio.sleep(GUARD_S)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=SHORT_TIMEOUT_S) as up:
            response = await up.send("GET", b"/", [], b"")
            got = []
            with pytest.raises(UpstreamTimeout):
                async for part in response.aiter_raw():
                    got.append(part)
            assert got == [b"abc"]
            await response.aclose()
            assert up.open_connections == 0
        assert srv.connections == 1

    run(scenario())


@pytest.mark.parametrize(
    "partial",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc",
        CHUNKED_HEAD + chunk(b"abc"),
    ],
    ids=["content-length", "chunked"],
)
def test_close_mid_body_is_an_error_and_the_connection_is_dropped(
    run: Run[None], partial: bytes
) -> None:
    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(partial)  # then hang up, short of what was promised
        else:
            await conn.answer_all(echo_target)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            response = await up.send("GET", b"/", [], b"")
            got = []
            with pytest.raises(UpstreamError) as caught:
                async for part in response.aiter_raw():
                    got.append(part)
            assert not isinstance(caught.value, UpstreamTimeout)
            assert got == [b"abc"]
            await response.aclose()
            assert up.open_connections == 0
            assert (await fetch(up, "GET", b"/next"))[2] == b"echo /next"
        assert srv.connections == 2

    run(scenario())


@pytest.mark.parametrize(
    "garbage",
    [
        b"NOT HTTP\r\n\r\n",
        b"HTTP/1.1 abc nonsense\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
    ],
)
def test_garbage_answer_is_an_upstream_error(run: Run[None], garbage: bytes) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(garbage)
        await asyncio.sleep(GUARD_S)  # and keep the connection open

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            async with asyncio.timeout(1.0):  # fails on the bytes, not on the read timeout
                with pytest.raises(UpstreamError) as caught:
                    await up.send("GET", b"/", [], b"")
            assert not isinstance(caught.value, UpstreamTimeout)
            assert up.open_connections == 0
        assert len(srv.requests) == 1

    run(scenario())


def test_fresh_connection_closed_before_answering_is_an_error(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        await conn.read_request()  # and hang up without a word

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            with pytest.raises(UpstreamError) as caught:
                await up.send("GET", b"/", [], b"")
            assert not isinstance(caught.value, UpstreamTimeout)
        assert srv.connections == 1  # a fresh connection failing is not a stale one: no retry

    run(scenario())


@contextmanager
def full_backlog() -> Iterator[int]:
    """A listening port whose accept queue is full: a new connect hangs in SYN retries."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port: int = listener.getsockname()[1]
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            fillers.append(filler)
            with suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_connect_timeout(run: Run[None]) -> None:
    async def scenario() -> None:
        with full_backlog() as port:
            await asyncio.sleep(0.02)  # let the fillers take the queue
            async with upstream(
                f"http://127.0.0.1:{port}", timeout_s=3.0, connect_timeout_s=SHORT_TIMEOUT_S
            ) as up:
                loop = asyncio.get_running_loop()
                started = loop.time()
                with pytest.raises(UpstreamTimeout):
                    await up.send("GET", b"/", [], b"")
                assert loop.time() - started < SHORT_TIMEOUT_S + 1.5
                assert up.open_connections == 0

    run(scenario())


# --- 9. stale kept-alive connections --------------------------------------------------------------


def fresh(request: Request) -> bytes:
    if request.method == b"HEAD":
        return b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n"
    return reply(body=b"fresh " + request.body)


def _first_answers_once_then_drops_the_next(first_body: bytes = b"first") -> Handler:
    """Connection 0 answers one request, reads the next one and hangs up unanswered."""

    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(reply(body=first_body))
            await conn.read_request()
        else:
            await conn.answer_all(fresh)

    return handler


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_idempotent_request_on_a_stale_connection_is_retried(run: Run[None], method: str) -> None:
    async def scenario() -> None:
        async with (
            Server(_first_answers_once_then_drops_the_next()) as srv,
            upstream(srv.url) as up,
        ):
            assert (await fetch(up))[2] == b"first"
            status, _, body = await fetch(up, method, b"/again")
            assert (status, body) == (200, b"" if method == "HEAD" else b"fresh ")
            if method != "HEAD":  # (a HEAD answer's connection is not kept: no body to skip)
                assert up.open_connections == 1
        assert srv.connections == 2
        assert [(r.method, r.connection) for r in srv.requests] == [
            (b"GET", 0),
            (method.encode(), 0),
            (method.encode(), 1),
        ]

    run(scenario())


@pytest.mark.parametrize("streamed", [False, True], ids=["bytes", "stream"])
def test_post_on_a_stale_connection_is_not_replayed(run: Run[None], streamed: bool) -> None:
    async def scenario() -> None:
        async with (
            Server(_first_answers_once_then_drops_the_next()) as srv,
            upstream(srv.url) as up,
        ):
            assert (await fetch(up))[2] == b"first"
            payload: bytes | AsyncIterator[bytes] = (
                stream_of(b"pay", b"load") if streamed else b"payload"
            )
            with pytest.raises(UpstreamError) as caught:
                await up.send("POST", b"/v1/messages", [], payload)
            assert not isinstance(caught.value, UpstreamTimeout)
            assert up.open_connections == 0
            assert (await fetch(up, "POST", b"/", None, b"later"))[2] == b"fresh later"
        posted = [r for r in srv.requests if r.body == b"payload"]
        assert len(posted) == 1  # the upstream saw it once: never sent twice
        assert srv.connections == 2

    run(scenario())


def test_get_is_not_replayed_once_the_answer_started(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(reply(body=b"first"))
            await conn.read_request()
            await conn.send(b"HTTP/1.1 200 OK\r\n")  # a partial head, then hang up
        else:
            await conn.answer_all(echo_target)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            await fetch(up)
            with pytest.raises(UpstreamError) as caught:
                await up.send("GET", b"/", [], b"")
            assert not isinstance(caught.value, UpstreamTimeout)
        assert srv.connections == 1

    run(scenario())


def test_idle_connection_closed_by_the_upstream_is_noticed(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        request = await conn.read_request()
        assert request is not None
        await conn.send(reply(body=b"once " + request.body))
        # returning hangs up the idle kept-alive connection

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            assert (await fetch(up, "POST", b"/", None, b"a"))[2] == b"once a"
            for _ in range(100):
                if up.open_connections == 0:
                    break
                await asyncio.sleep(0.01)
            assert up.open_connections == 0  # the pool saw the hang-up
            assert (await fetch(up, "POST", b"/", None, b"b"))[2] == b"once b"
        assert [r.body for r in srv.requests] == [b"a", b"b"]
        assert srv.connections == 2

    run(scenario())


# --- 10. keep-alive expiry ------------------------------------------------------------------------


@pytest.mark.parametrize(("expiry_s", "connections"), [(0.05, 2), (5.0, 1)])
def test_keepalive_expiry(run: Run[None], expiry_s: float, connections: int) -> None:
    async def scenario() -> None:
        async with (
            Server(answering(echo_target)) as srv,
            upstream(srv.url, keepalive_expiry_s=expiry_s) as up,
        ):
            await fetch(up)
            await asyncio.sleep(0.1)
            await fetch(up)
            assert up.open_connections == 1
        assert srv.connections == connections

    run(scenario())


# --- TLS material (trustme) -----------------------------------------------------------------------


@dataclass
class Tls:
    ca: trustme.CA
    server: ssl.SSLContext  # a certificate for localhost and 127.0.0.1
    wrong_name: ssl.SSLContext  # a certificate for another host

    def client(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ca.configure_trust(context)
        return context


@pytest.fixture(scope="module")
def tls() -> Tls:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(server)
    wrong_name = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.example.org").configure_cert(wrong_name)
    return Tls(ca, server, wrong_name)


# --- 11. flow control -----------------------------------------------------------------------------


@pytest.mark.parametrize("secure", [False, True], ids=["plain", "tls"])
def test_large_answer_read_slowly_arrives_intact_with_back_pressure(
    run: Run[None], tls: Tls, secure: bool
) -> None:
    piece = 64 * 1024
    pieces = 64  # 4 MiB
    data = random.Random(11).randbytes(piece * pieces)
    assert len(data) > 8 * HIGH_WATER > 8 * LOW_WATER

    async def handler(conn: Conn) -> None:
        await conn.read_request()
        await conn.send(CHUNKED_HEAD)
        for i in range(pieces):
            await conn.send(chunk(data[i * piece : (i + 1) * piece]))
        await conn.send(LAST_CHUNK)
        await conn.answer_all(echo_target)

    async def scenario() -> None:
        server = Server(handler, tls.server if secure else None)
        async with server as srv, upstream(srv.url, ssl_context=tls.client()) as up:
            response = await up.send("GET", b"/big", [], b"")
            await asyncio.sleep(0.2)  # not reading: the client must stop reading too
            transport = response._connection.transport
            assert transport is not None
            assert not transport.is_reading()
            assert response._buffered <= HIGH_WATER + MAX_READ
            got = []
            async for part in response.aiter_raw():
                got.append(part)
                await asyncio.sleep(0.001)
            await response.aclose()
            assert b"".join(got) == data
            assert len(got) > 1
            assert (await fetch(up, "GET", b"/after"))[2] == b"echo /after"  # resumed
        assert srv.connections == 1

    run(scenario())


def test_large_streamed_body_waits_for_a_slow_reader(run: Run[None]) -> None:
    piece = 64 * 1024
    data = random.Random(12).randbytes(piece * 48)  # 3 MiB
    buffered: list[int] = []

    async def handler(conn: Conn) -> None:
        sock = conn.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        await conn.reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(0.2)  # not reading yet: the client must stop writing
        body = await conn.reader.readexactly(len(data))
        await conn.send(reply(body=b"%d" % len(body) if body == data else b"corrupt"))
        await conn.answer_all(echo_target)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:

            async def body() -> AsyncIterator[bytes]:
                for i in range(0, len(data), piece):
                    [connection] = up._open
                    transport = connection.transport
                    assert transport is not None
                    if i == 0:  # small kernel buffers: the client's own buffer shows
                        sock = transport.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
                    buffered.append(transport.get_write_buffer_size())
                    yield data[i : i + piece]

            length = [(b"content-length", b"%d" % len(data))]
            assert (await fetch(up, "POST", b"/up", length, body()))[2] == b"%d" % len(data)
            assert (await fetch(up, "GET", b"/after"))[2] == b"echo /after"
        assert srv.connections == 1
        assert max(buffered) <= 4 * piece  # held back, not piled up in memory

    run(scenario())


# --- 12. TLS --------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_tls_requests_share_one_connection(run: Run[None], tls: Tls, host: str) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target), tls.server) as srv:
            base = f"https://{host}:{srv.port}/api"
            async with upstream(base, ssl_context=tls.client()) as up:
                for i in range(5):
                    status, _, body = await fetch(up, "POST", b"/r/%d" % i, None, b"{}")
                    assert (status, body) == (200, b"echo /api/r/%d" % i)
                assert up.open_connections == 1
        assert srv.connections == 1
        assert srv.requests[0].get(b"host") == f"{host}:{srv.port}".encode()

    run(scenario())


def test_tls_chunked_answer_streams(run: Run[None], tls: Tls) -> None:
    async def scenario() -> None:
        go_on = asyncio.Event()

        async def handler(conn: Conn) -> None:
            await conn.read_request()
            await conn.send(CHUNKED_HEAD + chunk(b"one"))
            await asyncio.wait_for(go_on.wait(), 3)
            await conn.send(chunk(b"two") + chunk(b"three") + LAST_CHUNK)
            await conn.answer_all(echo_target)

        async with (
            Server(handler, tls.server) as srv,
            upstream(f"https://localhost:{srv.port}", ssl_context=tls.client()) as up,
        ):
            response = await up.send("GET", b"/s", [], b"")
            chunks = response.aiter_raw()
            assert await asyncio.wait_for(anext(chunks), 1.0) == b"one"
            go_on.set()
            assert b"".join([part async for part in chunks]) == b"twothree"
            await response.aclose()
            assert (await fetch(up))[2] == b"echo /"
        assert srv.connections == 1

    run(scenario())


def _assert_tls_refused(caught: pytest.ExceptionInfo[UpstreamError]) -> None:
    assert not isinstance(caught.value, UpstreamTimeout)
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)


def test_tls_untrusted_ca_is_refused(run: Run[None], tls: Tls) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target), tls.server) as srv:
            context = ssl.create_default_context()  # the system CAs, not ours
            async with upstream(f"https://localhost:{srv.port}", ssl_context=context) as up:
                with pytest.raises(UpstreamError) as caught:
                    await up.send("GET", b"/", [], b"")
                _assert_tls_refused(caught)
                assert up.open_connections == 0
        assert srv.requests == []

    run(scenario())


def test_tls_certificate_for_another_host_is_refused(run: Run[None], tls: Tls) -> None:
    async def scenario() -> None:
        async with (
            Server(answering(echo_target), tls.wrong_name) as srv,
            upstream(f"https://localhost:{srv.port}", ssl_context=tls.client()) as up,
        ):
            with pytest.raises(UpstreamError) as caught:
                await up.send("GET", b"/", [], b"")
            _assert_tls_refused(caught)
        assert srv.requests == []

    run(scenario())


def test_tls_verifies_by_default(run: Run[None], tls: Tls) -> None:
    async def scenario() -> None:
        async with (
            Server(answering(echo_target), tls.server) as srv,
            upstream(f"https://localhost:{srv.port}") as up,
        ):
            with pytest.raises(UpstreamError) as caught:
                await up.send("GET", b"/", [], b"")
            _assert_tls_refused(caught)
        assert srv.requests == []

    run(scenario())


# --- 13. the base URL: path prefix and host header ------------------------------------------------


@pytest.mark.parametrize("prefix", ["/prefix/", "/prefix"])
def test_path_prefix_is_prepended(run: Run[None], prefix: str) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target)) as srv, upstream(srv.url + prefix) as up:
            body = (await fetch(up, "GET", b"/v1/messages?beta=true"))[2]
        assert body == b"echo /prefix/v1/messages?beta=true"
        assert srv.requests[0].target == b"/prefix/v1/messages?beta=true"

    run(scenario())


@pytest.mark.parametrize(
    ("base", "host", "target"),
    [
        ("http://example.com", b"example.com", b"/v1/x"),
        ("http://example.com:80", b"example.com", b"/v1/x"),
        ("https://example.com:443/", b"example.com", b"/v1/x"),
        ("https://Example.COM/api/", b"example.com", b"/api/v1/x"),
        ("http://example.com:8080/a/b", b"example.com:8080", b"/a/b/v1/x"),
        ("https://example.com:80", b"example.com:80", b"/v1/x"),
        ("http://example.com:443", b"example.com:443", b"/v1/x"),
        ("http://[::1]:8080", b"[::1]:8080", b"/v1/x"),
    ],
)
def test_request_head_from_the_base_url(base: str, host: bytes, target: bytes) -> None:
    up = Upstream(base, timeout_s=1.0)
    head = up._request_head("GET", b"/v1/x", [(b"Accept", b"*/*")], b"")
    assert head == b"GET %b HTTP/1.1\r\nhost: %b\r\nAccept: */*\r\n\r\n" % (target, host)


def test_request_head_body_framing() -> None:
    up = Upstream("http://h", timeout_s=1.0)

    def framing(method: str, headers: Headers, content: bytes | AsyncIterator[bytes]) -> bytes:
        head = up._request_head(method, b"/", headers, content)
        return head.split(b"host: h\r\n", 1)[1]

    async def never() -> AsyncIterator[bytes]:  # not iterated: only its type matters
        yield b""

    assert framing("GET", [], b"") == b"\r\n"
    assert framing("POST", [], b"") == b"content-length: 0\r\n\r\n"
    assert framing("PATCH", [], b"xyz") == b"content-length: 3\r\n\r\n"
    assert framing("DELETE", [], b"xy") == b"content-length: 2\r\n\r\n"
    assert framing("POST", [], never()) == b"transfer-encoding: chunked\r\n\r\n"
    given = [(b"Content-Length", b"9")]
    assert framing("POST", given, never()) == b"Content-Length: 9\r\n\r\n"


@pytest.mark.parametrize("base", ["ftp://example.com", "example.com:80", "http://", "/v1"])
def test_bad_base_url_is_refused(base: str) -> None:
    with pytest.raises(ValueError, match="http"):
        Upstream(base, timeout_s=1.0)


def test_header_lookup() -> None:
    headers = [(b"Content-Type", b"a"), (b"content-type", b"b"), (b"X", b"\xe9")]
    assert header(headers, b"content-type") == "a"
    assert header(headers, b"x") == "\xe9"
    assert header(headers, b"missing") is None


# --- abort (the client of the relay went away) ---------------------------------------------------


@pytest.mark.parametrize(
    "start",
    [CHUNKED_HEAD + chunk(b"first"), b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nfirst"],
    ids=["chunked", "until-close"],
)
def test_abort_mid_stream_wakes_the_reader_and_hangs_up(run: Run[None], start: bytes) -> None:
    """Even an answer that ends with the connection must not look complete after an abort."""

    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(start)
            await conn.reader.read()  # still "generating" until the client hangs up
        else:
            await conn.answer_all(echo_target)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            response = await up.send("POST", b"/v1/messages", [], b"{}")
            task, got = await reading_past_the_first_chunk(response)
            response.abort()
            with pytest.raises(UpstreamError) as caught:
                await asyncio.wait_for(task, 1.0)  # at once, not after the read timeout
            assert not isinstance(caught.value, UpstreamTimeout)
            assert response.aborted
            assert got == [b"first"]
            assert up.open_connections == 0
            for _ in range(100):  # the upstream sees the hang-up and can stop generating
                if srv.ended:
                    break
                await asyncio.sleep(0.01)
            assert srv.ended == [0]
            await response.aclose()
            assert (await fetch(up, "GET", b"/next"))[2] == b"echo /next"
        assert srv.connections == 2

    run(scenario())


def test_abort_after_the_answer_completed_changes_nothing(run: Run[None]) -> None:
    async def scenario() -> None:
        async with Server(answering(echo_target)) as srv, upstream(srv.url) as up:
            response = await up.send("GET", b"/done", [], b"")
            assert await read_body(response) == b"echo /done"
            response.abort()
            assert not response.aborted
            await response.aclose()
            assert up.open_connections == 1
            assert (await fetch(up, "GET", b"/next"))[2] == b"echo /next"
        assert srv.connections == 1

    run(scenario())


# --- 14. cancellation -----------------------------------------------------------------------------


def test_cancelled_read_drops_the_connection(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await conn.send(CHUNKED_HEAD + chunk(b"first"))
            await asyncio.sleep(GUARD_S)  # the rest never comes
        else:
            await conn.answer_all(echo_target)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            response = await up.send("GET", b"/stream", [], b"")
            task, got = await reading_past_the_first_chunk(response)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await response.aclose()
            assert got == [b"first"]
            assert up.open_connections == 0
            for i in range(3):
                assert (await fetch(up, "GET", b"/n/%d" % i))[2] == b"echo /n/%d" % i
            assert up.open_connections == 1
        assert srv.connections == 2

    run(scenario())


def test_cancelled_send_drops_the_connection(run: Run[None]) -> None:
    async def handler(conn: Conn) -> None:
        if conn.index == 0:
            await conn.read_request()
            await asyncio.sleep(0.2)  # answers too late for the cancelled caller
            await conn.send(reply(body=b"late"))
            await conn.answer_all(echo_target)
        else:
            await conn.answer_all(echo_target)

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url, timeout_s=3.0) as up:
            task = asyncio.create_task(up.send("GET", b"/slow", [], b""))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert up.open_connections == 0
            await asyncio.sleep(0.25)  # the late answer must not reach the next request
            assert (await fetch(up, "GET", b"/next"))[2] == b"echo /next"
        assert srv.connections == 2

    run(scenario())


# --- surplus bytes --------------------------------------------------------------------------------


def test_bytes_after_the_end_of_an_answer_are_not_part_of_it(run: Run[None]) -> None:
    """A second, unrequested answer right behind the first must not leak into its body."""

    async def handler(conn: Conn) -> None:
        while await conn.read_request() is not None:
            await conn.send(
                reply(body=b"ok", headers=[(b"x-n", b"1")])
                + reply(body=b"SMUGGLED", headers=[(b"x-n", b"2")])
            )

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            status, headers, body = await fetch(up)
            assert (status, list(headers), body) == (
                200,
                [(b"x-n", b"1"), (b"content-length", b"2")],
                b"ok",
            )
            second = await fetch(up)
            assert second[2] == b"ok"
        assert srv.connections == 2  # the connection that carried surplus bytes was dropped

    run(scenario())


def test_a_body_sent_to_head_is_not_part_of_the_answer(run: Run[None]) -> None:
    """A server that wrongly sends a body after a HEAD answer: it must not reach the caller."""

    async def handler(conn: Conn) -> None:
        while await conn.read_request() is not None:
            await conn.send(reply(body=b"0123456789"))

    async def scenario() -> None:
        async with Server(handler) as srv, upstream(srv.url) as up:
            assert await fetch(up, "HEAD") == (200, [(b"content-length", b"10")], b"")
            assert (await fetch(up, "GET"))[2] == b"0123456789"
        assert len(srv.requests) == 2

    run(scenario())

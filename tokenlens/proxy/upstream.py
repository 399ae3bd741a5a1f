"""The relay's own HTTP/1.1 client to the upstream: asyncio protocols parsed by httptools.

Why not httpx or httpcore on the hot path: the proxy may add 1 ms per request, and their
per-request machinery (URL and header models, h11's state machine, anyio streams, pool
bookkeeping) measured 1.5-2 ms on a 2-core machine, several times the rest of the proxy
(`bench/bench_proxy.py`). A relay needs far less: write the client's bytes, parse the
answer with httptools (the llhttp parser uvicorn already uses for our server side) and
keep connections alive. TLS is the event loop's own, verified against the CA bundle httpx
uses (so `SSL_CERT_FILE` works the same). Background calls keep the httpx client.

Bodies go out as given; answers come back raw (transfer-decoded, still content-encoded)
and chunk by chunk as they arrive, with back-pressure when the client reads slowly.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import cast
from urllib.parse import urlsplit

import httptools
import httpx


class UpstreamError(Exception):
    """The upstream could not be reached, or broke off or garbled the exchange."""


class UpstreamTimeout(UpstreamError):
    """Connecting, sending, or waiting for the next bytes of the answer took too long."""


class _StaleConnection(UpstreamError):
    """A kept-alive connection was closed by the upstream before it answered."""


#: What a failed upstream exchange raises (timeouts first: they are also UpstreamErrors).
TIMEOUT_ERRORS: tuple[type[Exception], ...] = (UpstreamTimeout,)
UPSTREAM_ERRORS: tuple[type[Exception], ...] = (UpstreamError,)

Headers = list[tuple[bytes, bytes]]
Content = bytes | AsyncIterator[bytes]

#: Replayed once on a fresh connection when a kept-alive one turns out dead. Never POST:
#: the upstream may have acted on it; the client's SDK decides about retrying the 502.
_REPLAYABLE = frozenset({"GET", "HEAD", "OPTIONS"})
#: Methods whose empty body still gets `content-length: 0` (RFC 9110 8.6).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: Stop reading from the upstream while this much answer waits for the client; resume
#: below the low mark.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024


class UpstreamResponse:
    """One answer: status and raw headers once they arrived, then the body as it comes."""

    def __init__(self, connection: _Connection, method: str, read_timeout_s: float) -> None:
        self._connection = connection
        self._loop = connection.loop
        self._head_only = method == "HEAD"
        self._read_timeout_s = read_timeout_s
        self.status = 0
        self.headers: Sequence[tuple[bytes, bytes]] = []
        self._headers: Headers = []
        self._head: asyncio.Future[None] = self._loop.create_future()
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._error: UpstreamError | None = None
        self.complete = False
        self.keep_alive = False
        #: Any byte of the answer arrived (else a dead kept-alive connection is "stale").
        self.received = False
        #: The request body was not sent in full (the upstream answered early).
        self.cut_short = False
        #: `abort` ended the exchange (the client went away), not the upstream.
        self.aborted = False
        self._released = False

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """Body chunks as they arrive; raises UpstreamError if the upstream breaks off."""
        while True:
            if self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._buffered <= LOW_WATER:
                    self._connection.resume_reading()
                yield chunk
            elif self._error is not None:
                raise self._error
            elif self.complete:
                return
            else:
                self._waiter = self._loop.create_future()
                await _wait(self._waiter, self._read_timeout_s, "the next bytes of the answer")

    def abort(self) -> None:
        """Give up on the rest of the answer (the client left): close the connection, so a
        generating upstream stops, and end `aiter_raw` with an UpstreamError."""
        if self.complete or self._error is not None:
            return
        self.aborted = True
        self.fail(UpstreamError("the relay gave up on the answer"))
        self._connection.close()

    async def aclose(self) -> None:
        """Hand the connection back (if the exchange finished cleanly) or close it.

        Idempotent: a second call must not release the connection's *next* exchange."""
        if self._released:
            return
        self._released = True
        self._connection.release(reusable=self.complete and self.keep_alive and not self.cut_short)

    async def wait_head(self) -> None:
        await _wait(self._head, self._read_timeout_s, "the answer to start")

    # --- fed by the connection ------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self, status: int) -> bool:
        """Record the head; False for an interim (1xx) answer, which is skipped."""
        if 100 <= status < 200 and status != 101:
            self._headers = []
            return False
        self.status = status
        self.headers = self._headers
        if not self._head.done():
            self._head.set_result(None)
        if self._head_only:  # no body follows, whatever the headers say
            self.finish(keep_alive=False)
        return True

    def on_body(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        if self._buffered > HIGH_WATER:
            self._connection.pause_reading()
        self._wake()

    def finish(self, *, keep_alive: bool) -> None:
        if not self.complete:
            self.complete = True
            self.keep_alive = keep_alive
            self._wake()

    def fail(self, error: UpstreamError) -> None:
        if self.complete or self._error is not None:
            return
        self._error = error
        if not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved here; `wait_head` re-raises it
        self._wake()

    def lost(self) -> None:
        """The connection closed: the end of a read-until-close body, or a failure."""
        if self.complete or self._error is not None:
            return
        if not self.status:
            kind = _StaleConnection if not self.received else UpstreamError
            self.fail(kind("the upstream closed the connection before answering"))
        elif self._delimited_by_close():
            self.finish(keep_alive=False)
        else:
            self.fail(UpstreamError("the upstream closed the connection mid-answer"))

    def _delimited_by_close(self) -> bool:
        if self.status in (204, 304):
            return True
        names = {name.lower() for name, _ in self._headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One connection to the upstream, carrying one exchange at a time."""

    def __init__(self, pool: Upstream, loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._response: UpstreamResponse | None = None
        self._interim = False
        self._surplus = False
        self._reading_paused = False
        self._writable: asyncio.Future[None] | None = None

    # --- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        response = self._response
        if response is None:  # bytes nobody asked for: this connection is unusable
            self.close()
            return
        response.received = True
        try:
            self._parser.feed_data(data)
            if self._surplus:
                self.close()
        except httptools.HttpParserUpgrade:
            response.fail(UpstreamError("the upstream switched protocols"))
            self.close()
        except httptools.HttpParserError as exc:
            response.fail(UpstreamError(f"malformed answer from the upstream ({exc})"))
            self.close()

    def eof_received(self) -> bool:
        return False  # let the transport close; connection_lost ends the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        if self._response is not None:
            self._response.lost()
        self._wake_writer()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        self._wake_writer()

    # --- httptools callbacks ----------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if response := self._live():
            response.on_header(name, value)

    def on_headers_complete(self) -> None:
        if response := self._live():
            self._interim = not response.on_headers_complete(self._parser.get_status_code())

    def on_body(self, body: bytes) -> None:
        if response := self._live():
            response.on_body(body)

    def on_message_complete(self) -> None:
        if self._interim:  # the end of a 1xx: the real answer follows
            self._interim = False
            return
        if response := self._live():
            # read now: llhttp resets the flag once the callback returns
            response.finish(keep_alive=self._parser.should_keep_alive())

    def _live(self) -> UpstreamResponse | None:
        """The exchange parser events belong to; None (and the connection condemned) for
        bytes after its answer ended: a second answer, or a body sent to a HEAD request,
        must never be read as part of the first or of the next exchange."""
        response = self._response
        if response is None or response.complete:
            self._surplus = True
            return None
        return response

    # --- used by the pool ---------------------------------------------------------------

    async def exchange(
        self, method: str, head: bytes, content: Content, read_timeout_s: float, *, chunked: bool
    ) -> UpstreamResponse:
        """Send one request; return once the answer's status and headers arrived."""
        assert self.transport is not None
        response = UpstreamResponse(self, method, read_timeout_s)
        self._response = response
        if isinstance(content, bytes):
            self.transport.write(head + content)
        else:
            self.transport.write(head)
            await self._send_stream(content, response, read_timeout_s, chunked=chunked)
        await response.wait_head()
        return response

    async def _send_stream(
        self,
        content: AsyncIterator[bytes],
        response: UpstreamResponse,
        timeout_s: float,
        *,
        chunked: bool,
    ) -> None:
        assert self.transport is not None
        async for chunk in content:
            if self.closed or response.status:
                # The upstream answered (or hung up) before the body was sent: stop, and
                # never reuse a connection whose request was cut short.
                response.cut_short = True
                return
            if chunk:
                self.transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
            if self._writable is not None:
                await _wait(self._writable, timeout_s, "the upstream to take the body")
        if chunked and not self.closed:
            self.transport.write(b"0\r\n\r\n")

    def release(self, *, reusable: bool) -> None:
        self._response = None
        self._interim = False
        if reusable and not self.closed:
            self.resume_reading()
            self.pool.keep(self)
        else:
            self.close()

    def pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self.closed:
            self._reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self.closed:
            self._reading_paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        self.closed = True
        self.pool.forget(self)

    def _wake_writer(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)


class Upstream:
    """A keep-alive pool to one upstream `base` (scheme, host, port, optional path prefix)."""

    def __init__(
        self,
        base: str,
        *,
        timeout_s: float,
        connect_timeout_s: float = 10.0,
        max_keepalive: int = 200,
        keepalive_expiry_s: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {base!r}")
        self._host = parts.hostname
        default_port = 443 if parts.scheme == "https" else 80
        self._port = parts.port or default_port
        netloc = self._host if ":" not in self._host else f"[{self._host}]"
        if parts.port not in (None, default_port):
            netloc += f":{parts.port}"
        self._host_header = netloc.encode("idna")
        self._prefix = parts.path.rstrip("/").encode("latin-1")
        self._ssl = None
        if parts.scheme == "https":
            self._ssl = ssl_context or httpx.create_ssl_context()
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._max_keepalive = max_keepalive
        self._expiry_s = keepalive_expiry_s
        self._idle: deque[_Connection] = deque()
        self._open: set[_Connection] = set()

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def send(
        self, method: str, target: bytes, headers: Headers, content: Content
    ) -> UpstreamResponse:
        """Send `headers` as given plus `host` and the body framing; raises UPSTREAM_ERRORS.

        Returns once the status and headers arrived; the caller reads the body with
        `aiter_raw` and must `aclose` the response.
        """
        head = self._request_head(method, target, headers, content)
        chunked = _needs_chunking(headers, content)
        while True:
            connection = await self._acquire()
            reused, connection.used = connection.used, True
            try:
                return await connection.exchange(
                    method, head, content, self._timeout_s, chunked=chunked
                )
            except _StaleConnection:
                connection.close()
                if not (reused and method in _REPLAYABLE and isinstance(content, bytes)):
                    raise
            except BaseException:
                connection.close()
                raise

    def _request_head(
        self, method: str, target: bytes, headers: Headers, content: Content
    ) -> bytes:
        parts = [
            b"%b %b HTTP/1.1\r\nhost: %b\r\n"
            % (method.encode("ascii"), self._prefix + target, self._host_header)
        ]
        parts.extend(b"%b: %b\r\n" % (name, value) for name, value in headers)
        if isinstance(content, bytes):
            if content or method in _BODY_METHODS:
                parts.append(b"content-length: %d\r\n" % len(content))
        elif _needs_chunking(headers, content):
            parts.append(b"transfer-encoding: chunked\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)

    async def _acquire(self) -> _Connection:
        now = time.monotonic()
        idle = self._idle
        while idle and now - idle[0].idle_since > self._expiry_s:
            idle.popleft().close()
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return await self._connect()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, loop),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
        except TimeoutError as exc:
            raise UpstreamTimeout(
                f"connecting to the upstream took over {self._connect_timeout_s:g} s"
            ) from exc
        except OSError as exc:  # refused, unreachable, DNS, TLS (ssl.SSLError is an OSError)
            raise UpstreamError(f"cannot connect to the upstream ({type(exc).__name__})") from exc
        self._open.add(connection)
        return connection

    def keep(self, connection: _Connection) -> None:
        if len(self._idle) >= self._max_keepalive:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    def forget(self, connection: _Connection) -> None:
        """A closed connection leaves the pool at once (so it holds no keep-alive slot)."""
        self._open.discard(connection)
        if connection in self._idle:
            self._idle.remove(connection)

    async def aclose(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._idle.clear()


def _needs_chunking(headers: Headers, content: Content) -> bool:
    """A streamed body without a length given goes out chunk-framed."""
    return not isinstance(content, bytes) and not any(
        name.lower() == b"content-length" for name, _ in headers
    )


async def _wait(future: asyncio.Future[None], timeout_s: float, what: str) -> None:
    """Await `future`, failing with UpstreamTimeout after `timeout_s` (one timer, no task)."""
    if future.done():
        return future.result()

    def expire() -> None:
        if not future.done():
            future.set_exception(UpstreamTimeout(f"waited over {timeout_s:g} s for {what}"))

    timer = future.get_loop().call_later(timeout_s, expire)
    try:
        await future
    finally:
        timer.cancel()


def header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header `name` (lower-case), or None."""
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None

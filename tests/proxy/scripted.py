"""A scripted upstream for the relay's contract tests: each test writes the exact bytes.

Why raw asyncio and not a web framework: the tests need answers no framework sends (cut
bodies, garbage, an unasked `101`, a second answer behind the first, a stall mid-chunk)
and need to see what happened on the upstream's side (connections accepted, requests
read, connections the proxy closed). The server runs in its own thread and event loop,
like the proxy, so a test drives it with an ordinary synchronous client.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

Headers = list[tuple[bytes, bytes]]
#: A hung scenario fails after this long instead of blocking the suite.
GUARD_S = 10.0


@dataclass
class Request:
    """One request as the server read it off the wire."""

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
        self,
        server: Scripted,
        index: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
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
        if (request.get(b"transfer-encoding") or b"").lower() == b"chunked":
            request.body = await self._read_chunked()
        elif length is not None:
            request.body = await self.reader.readexactly(int(length))
        self.server.requests.append(request)
        return request

    async def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer_all(self, respond: Callable[[Request], bytes]) -> None:
        """Answer every further request on this connection until the client hangs up."""
        while (request := await self.read_request()) is not None:
            await self.send(respond(request))

    async def until_closed(self) -> None:
        """Wait until the client (the proxy) closes this connection."""
        while await self.reader.read(65536):
            pass


Handler = Callable[[Conn], Awaitable[None]]


class Scripted:
    """An HTTP upstream on 127.0.0.1 whose every connection runs `handler` (in a thread)."""

    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.connections = 0
        self.requests: list[Request] = []
        self.ended: list[int] = []  # connections whose handler returned (or was hung up on)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> Scripted:
        self._thread.start()
        if not self._ready.wait(GUARD_S):
            raise RuntimeError("scripted upstream did not start")
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(GUARD_S)

    def call(self, fn: Callable[[], Any]) -> None:
        """Run `fn` on the server's loop (e.g. to set an asyncio.Event)."""
        self._loop.call_soon_threadsafe(fn)

    def wait_ended(self, count: int = 1, timeout: float = 5.0) -> bool:
        """True once `count` connections have ended."""
        deadline = time.monotonic() + timeout
        while len(self.ended) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tasks: set[asyncio.Task[Any]] = set()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            index = self.connections
            self.connections += 1
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                async with asyncio.timeout(GUARD_S):
                    await self.handler(Conn(self, index, reader, writer))
            except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, TimeoutError):
                pass
            finally:
                self.ended.append(index)
                writer.close()
                tasks.discard(task)

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def echo_target(request: Request) -> bytes:
    return reply(body=b"echo " + request.target)

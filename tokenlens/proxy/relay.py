"""Wire-level helpers of the relay: which headers cross, errors, and reading a response.

Why hand-picked headers: the proxy must be invisible. Everything the client sent crosses
(keys, `anthropic-version`, `anthropic-beta`, `accept-encoding`), except hop-by-hop
headers, `host`, a stale `content-length` and our own `x-tokenlens-*` controls. Responses
come back byte for byte (raw, still encoded) with their status and headers.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE
from yarl import URL

#: RFC 9110 hop-by-hop headers, plus ones the server in front of us sets itself.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
#: `expect: 100-continue` is answered by our own server; the body is here by now.
_DROP_REQUEST = frozenset(
    name.encode("latin-1") for name in HOP_BY_HOP | {"host", "content-length", "expect"}
)
_DROP_RESPONSE = frozenset(name.encode("latin-1") for name in HOP_BY_HOP)
#: Headers a background call (count_tokens, shadow replay) needs from the client's request.
CALL_HEADERS = frozenset({"x-api-key", "authorization", "anthropic-version", "anthropic-beta"})
#: Fields `/v1/messages/count_tokens` accepts out of a Messages body.
COUNT_FIELDS = ("model", "messages", "system", "tools", "tool_choice", "thinking")
#: Responses up to this size (with a known length, not SSE) are read whole, then sent.
BUFFER_LIMIT = 1024 * 1024


def request_headers(
    raw: Iterable[tuple[bytes, bytes]], *, keep_length: bool
) -> list[tuple[str, str]]:
    """Client headers to send upstream (`keep_length` when the body is streamed through).

    As text, which is what aiohttp takes: it writes headers back as UTF-8, so UTF-8 bytes
    (all real API headers are ASCII) cross unchanged.
    """
    out: list[tuple[str, str]] = []
    for key, value in raw:
        name = key.lower()
        if name.startswith(b"x-tokenlens-"):
            continue
        if name in _DROP_REQUEST and not (keep_length and name == b"content-length"):
            continue
        out.append((_text(key), _text(value)))
    return out


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # not UTF-8: the one case where the bytes change
        return raw.decode("latin-1")


def response_headers(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Upstream headers to send back (lower-cased, as ASGI wants them)."""
    return [(name, value) for key, value in raw if (name := key.lower()) not in _DROP_RESPONSE]


#: The bytes uvicorn refuses in a response header's name and value, taken from its own
#: patterns (single-byte classes), for a `bytes.translate` check: ~5x faster than `re`.
_BAD_NAME = bytes(b for b in range(256) if HEADER_RE.match(bytes([b])))
_BAD_VALUE = bytes(b for b in range(256) if HEADER_VALUE_RE.match(bytes([b])))


def unsendable(headers: list[tuple[bytes, bytes]]) -> bool:
    """True when the server in front of the client would refuse to write one of `headers`.

    uvicorn checks every response header against two patterns (control characters,
    separators in names) and raises once the response has been started, which leaves the
    client with nothing at all; checked here first, the client gets a 502 it can read.
    One pass over all names and one over all values (`x` is allowed in both).
    """
    names = b"x".join([name for name, _ in headers])
    values = b"x".join([value for _, value in headers])
    return len(names.translate(None, _BAD_NAME)) != len(names) or len(
        values.translate(None, _BAD_VALUE)
    ) != len(values)


def call_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Only the credentials and API-version headers of a request, for our own calls."""
    return {
        key.decode("latin-1").lower(): value.decode("latin-1")
        for key, value in raw
        if key.decode("latin-1").lower() in CALL_HEADERS
    }


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    """An error in Anthropic's shape, so SDKs raise their usual exception types."""
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": message}}, status_code=status
    )


class BufferedReply:
    """An ASGI response for an answer read whole: status, raw headers, body, then `after`.

    Why not starlette's Response: it derives headers we then replace, and its background
    task wrapper is a second layer around a single awaited call. `after` runs once the
    client has the whole answer (bookkeeping that must not delay it).
    """

    def __init__(
        self,
        status_code: int,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.status_code = status_code
        self.raw_headers = headers
        self.body = body
        self.after = after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # the upstream's own content-length is among the headers: the body is its raw bytes
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            await send({"type": "http.response.body", "body": self.body})
        finally:
            if self.after is not None:  # also when the client left: it releases a hold
                await self.after()


class StreamRelay:
    """An ASGI response that relays an upstream body chunk by chunk, as it arrives.

    Why not starlette's StreamingResponse: under uvicorn (ASGI spec 2.3) it runs every
    stream in an anyio task group just to notice a client leaving, which cost about half a
    millisecond of time-to-first-byte; the handler's `ClientWatch` does that job here.

    When `body` fails (the upstream broke off or stalled), the answer is left incomplete:
    the final empty chunk is never sent, and uvicorn closes the connection, so the client
    sees a broken answer exactly as it would from the upstream itself, never a clean end.
    """

    def __init__(
        self,
        body: AsyncGenerator[bytes, None],
        status_code: int,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        self.body = body
        self.status_code = status_code
        self.raw_headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }
        try:
            # The head goes with the first piece of the body, as aiohttp's server sends it:
            # one write and one segment instead of two (the server holds writes made in
            # one turn of the loop together, `server.HeldWrites`).
            first = await anext(self.body, b"")
        except BrokenAnswer:
            await send(start)  # what the upstream sent: a head, then a broken connection
            await self.body.aclose()
            return
        except BaseException:
            await self.body.aclose()
            raise
        await send(start)
        try:
            if first:
                await send({"type": "http.response.body", "body": first, "more_body": True})
                async for chunk in self.body:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except BrokenAnswer:
            return  # incomplete on purpose: uvicorn aborts the connection
        finally:
            await self.body.aclose()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def aclose(self) -> None:
        """Discard without sending (the body's own clean-up closes the upstream answer)."""
        await self.body.aclose()


class BrokenAnswer(Exception):
    """The upstream's answer broke off after it started: the client's must break too."""


async def broken(chunks: list[bytes]) -> AsyncGenerator[bytes, None]:
    """What arrived of an answer that then broke off: `chunks`, then BrokenAnswer."""
    for chunk in chunks:
        yield chunk
    raise BrokenAnswer


#: The ASGI scope key under which the server's connection offers to say when its client
#: leaves (`server.GuardedHttpToolsProtocol`): `watch(w)` / `unwatch(w)`, then
#: `w.client_left()` from the connection's `connection_lost`.
CONNECTION_KEY = "tokenlens.connection"
#: The ASGI scope key where the server's connection records a refusal it answered itself
#: while the app held the request (a body that stopped arriving: `(408, "body_timeout")`).
#: The connection it then closes is not a client that left: the app logs the request once,
#: as that refusal (the server counted it).
REFUSED_KEY = "tokenlens.refused"


class ClientWatch:
    """Notices the client leaving while its request waits on the upstream.

    uvicorn does not cancel a request's task when its client disconnects; it answers
    `receive()` with `http.disconnect`. Once the request body has been read, the request's
    task is cancelled the moment the client leaves, so an upstream call nobody waits for
    any more (the upstream may be generating thousands of tokens) is cancelled at once,
    whether the answer has started or not. `gone` tells that cancellation apart from any
    other.

    Under the proxy's own server protocol the connection itself reports its loss
    (`CONNECTION_KEY`): no task per request. Under any other ASGI server one task waits
    for `http.disconnect` on `receive`.
    """

    def __init__(self, receive: Receive, scope: Scope | None = None) -> None:
        self.gone = False
        self._receive = receive
        self._task = asyncio.current_task()  # the request's task (built in it)
        self._watcher: asyncio.Task[None] | None = None
        self._connection = scope.get(CONNECTION_KEY) if scope is not None else None
        self._watching = False

    def start(self) -> None:
        """Start watching (once the request body has been read in full: from then on
        `receive` is ours)."""
        if self._connection is not None:
            if not self._watching:
                self._watching = True
                self._connection.watch(self)
        elif self._watcher is None:
            self._watcher = asyncio.ensure_future(self._watch())

    def stop(self) -> None:
        if self._watching and self._connection is not None:
            self._watching = False
            self._connection.unwatch(self)
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None

    def client_left(self) -> None:
        """The client is gone: cancel the request's task."""
        self._watching = False
        self.gone = True
        if self._task is not None:
            self._task.cancel()

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self.client_left()


def upstream_url(base: str, target: bytes) -> URL:
    """The upstream URL for a request target (path and query, as the client sent them)."""
    return URL(base + target.decode("latin-1"), encoded=True)


def count_body(body: dict[str, Any]) -> dict[str, Any]:
    """The part of a Messages body that `count_tokens` accepts."""
    return {key: body[key] for key in COUNT_FIELDS if key in body}


def decode_body(raw: bytes, encoding: str | None) -> bytes | None:
    """Undo gzip/deflate of a buffered response; None for an encoding we do not read."""
    if not encoding or encoding == "identity":
        return raw
    try:
        if encoding == "gzip":
            return zlib.decompress(raw, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            return zlib.decompress(raw)
    except zlib.error:
        return None
    return None


def message_text(message: Any) -> str:
    """The text of a Messages API response object (text blocks joined)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def parse_message(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class SseTap:
    """Reads an SSE stream as it passes through, without ever holding it back.

    It picks out `usage` from `message_start` (cache health) and, when `capture_text`,
    the answer's text deltas (for the shadow judge). It stops reading once it has what it
    needs, so pass-through traffic pays almost nothing.
    """

    MAX_BUFFER = 256 * 1024

    def __init__(self, *, capture_text: bool) -> None:
        self.capture_text = capture_text
        self.usage: dict[str, Any] | None = None
        self.parts: list[str] = []
        self.complete = False
        self.done = False
        self._buffer = b""

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return
        self._buffer += chunk
        if len(self._buffer) > self.MAX_BUFFER:  # not an event stream we understand
            self.done = True
            self._buffer = b""
            return
        *events, self._buffer = self._buffer.replace(b"\r\n", b"\n").split(b"\n\n")
        for event in events:
            self._event(event)

    def _event(self, event: bytes) -> None:
        kind = b""
        data = b""
        for line in event.split(b"\n"):
            if line.startswith(b"event:"):
                kind = line[6:].strip()
            elif line.startswith(b"data:"):
                data += line[5:].strip()
        if kind == b"message_start":
            payload = _loads(data)
            message = payload.get("message") if payload else None
            usage = message.get("usage") if isinstance(message, dict) else None
            self.usage = usage if isinstance(usage, dict) else None
            if not self.capture_text:
                self.done = True
        elif kind == b"content_block_delta" and self.capture_text:
            payload = _loads(data)
            delta = payload.get("delta") if payload else None
            if isinstance(delta, dict) and delta.get("type") == "text_delta":
                self.parts.append(str(delta.get("text", "")))
        elif kind == b"message_stop":
            self.complete = True
            self.done = True


def _loads(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None

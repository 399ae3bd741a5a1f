"""The proxy's server side: uvicorn's settings, and the limits uvicorn does not have.

uvicorn (httptools) gives us an idle keep-alive timeout (`timeout_keep_alive`) but no
deadline for a request's head or body to arrive and no cap on the head's size: a client
trickling one header byte at a time holds a connection forever (slowloris), one trickling
its body holds it and the upstream connection its body streams into, and a 4 MB header is
read whole into memory. uvicorn's maintainers chose not to add these (its issue #157), so
`GuardedHttpToolsProtocol` adds three things to uvicorn's own protocol class, which
uvicorn accepts through `Config(http=...)` (`ProxyServerConfig` sets it up, and carries
the limits with it, also to worker processes):

- a deadline for the head: from the moment the connection opens, or the first byte of
  the next request on a kept-alive connection, until the request's headers are
  complete; past it the client gets `408` and the connection closes (a new connection
  that sends nothing is closed; an idle kept-alive one is uvicorn's keep-alive timeout's);
- a cap on the bytes received while the head is incomplete (a memory bound); past it the
  client gets `431`;
- a deadline for the body: `body_timeout_s` after the head, plus a second for every
  `MIN_BODY_RATE` bytes that arrived; past it the client gets `408` (or, if its answer
  has started, a closed connection). When the deadline finds uvicorn not reading (the app
  is not taking the body yet: not the client's delay), the clock starts again.

Parsing stays uvicorn's and httptools'; these are timers and byte counts. The exact
limits (header count and total size) are checked on the parsed headers at the ASGI
level (`header_problem`), where the answer can be an Anthropic-shaped error.

Requests answered here never reach the app, so its metrics would not see them: the app
puts a callback into uvicorn's lifespan state (`REFUSED_STATE`), which uvicorn hands to
this protocol as `app_state`, and every refusal (ours, and uvicorn's own `400` for a
request it cannot parse) is reported through it.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from tokenlens.proxy.relay import CONNECTION_KEY, REFUSED_KEY, ClientWatch
from tokenlens.proxy.settings import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_HEADER_BYTES,
    MIN_BODY_RATE,
    ProxySettings,
)

#: The lifespan-state key of the app's `refused(status, reason)` callback.
REFUSED_STATE = "tokenlens.refused"


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with head and body deadlines and a head size cap."""

    _head_timer: asyncio.TimerHandle | None = None
    _awaiting_head = False  # between requests: the next bytes start a request's head
    _head_bytes = 0
    _body_timer: asyncio.TimerHandle | None = None
    _body_pending = False  # the head is in, the body is not (yet) complete
    _body_started = 0.0
    _body_bytes = 0
    _watch: ClientWatch | None = None  # the current request's, while it waits on the upstream

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        limits = config if isinstance(config, ProxyServerConfig) else None
        self.head_timeout_s = limits.head_timeout_s if limits else DEFAULT_HEADER_TIMEOUT_S
        self.max_head_bytes = limits.max_head_bytes if limits else DEFAULT_MAX_HEADER_BYTES
        self.body_timeout_s = limits.body_timeout_s if limits else DEFAULT_BODY_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._writes = HeldWrites(transport, self.loop)
        super().connection_made(cast(asyncio.Transport, self._writes))
        self._await_head()
        self._start_deadline()  # uvicorn has no timer for a connection that says nothing

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        self._body_done()
        super().connection_lost(exc)
        if self.scope is not None:
            self.scope.pop(CONNECTION_KEY, None)  # type: ignore[misc]  # no cycle left behind
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.client_left()

    def data_received(self, data: bytes) -> None:
        awaiting = self._awaiting_head
        if awaiting:
            if self._head_timer is None:
                self._start_deadline()  # the first byte of a kept-alive connection's next head
            self._head_bytes += len(data)
        super().data_received(data)
        if awaiting and self._awaiting_head and self._head_bytes > self.max_head_bytes:
            self._refuse(431, "head_too_large", "Request header fields too large.")
        elif self._body_pending and self._body_timer is None:
            # a body still to come (one that came with its head never needs a timer)
            self._body_timer = self.loop.call_at(self._body_deadline(), self._body_late)

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._stop_deadline()
        self.scope[CONNECTION_KEY] = self  # type: ignore[literal-required]  # for ClientWatch
        self._writes.hold_next()  # its answer's head waits for the first body bytes
        super().on_headers_complete()
        self._body_pending, self._body_started, self._body_bytes = True, self.loop.time(), 0

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._body_done()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._writes.flush()  # the whole answer is written: out it goes, now
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self._await_head()  # idle until then: uvicorn's keep-alive timeout applies

    def watch(self, watch: ClientWatch) -> None:
        """Tell `watch` if the client leaves (instead of a task per request waiting on
        `receive` for `http.disconnect`, which uvicorn sends for the same loss)."""
        self._watch = watch

    def unwatch(self, watch: ClientWatch) -> None:
        if self._watch is watch:
            self._watch = None

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request it cannot parse: reported, then sent as uvicorn does."""
        self._report(400, "unparsable")
        super().send_400_response(msg)

    def _await_head(self) -> None:
        self._awaiting_head = True
        self._head_bytes = 0

    def _start_deadline(self) -> None:
        self._stop_deadline()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_late)

    def _stop_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self._head_bytes:
            self._refuse(408, "head_timeout", "Request headers not received in time.")
        elif not self.transport.is_closing():
            self.transport.close()  # nothing was asked: nothing to answer

    def _body_deadline(self) -> float:
        return self._body_started + self.body_timeout_s + self._body_bytes / MIN_BODY_RATE

    def _body_done(self) -> None:
        self._body_pending = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_late(self) -> None:
        self._body_timer = None
        if not self._body_pending or self.transport.is_closing():
            return
        now = self.loop.time()
        if self.flow.read_paused:  # the app is not taking the body: not the client's delay
            self._body_started, self._body_bytes = now, 0  # the clock starts again
        if now < (deadline := self._body_deadline()):
            self._body_timer = self.loop.call_at(deadline, self._body_late)
            return
        self._body_pending = False
        # the app holds this request: the close that follows is this refusal, not a client
        # that left (it logs the request as the 408 it was; `_report` counts it)
        self.scope[REFUSED_KEY] = (408, "body_timeout")  # type: ignore[literal-required]
        if self.cycle is not None and self.cycle.response_started:
            self._report(408, "body_timeout")
            self.logger.warning("Request body not received in time (408); connection closed")
            self.transport.close()  # its answer has begun: all that is left is to stop
        else:
            self._refuse(408, "body_timeout", "Request body not received in time.")

    def _report(self, status: int, reason: str) -> None:
        refused = self.app_state.get(REFUSED_STATE)
        if refused is not None:
            refused(status, reason)

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """Answer `status` with a one-line reason and close, as uvicorn answers a 400."""
        self._awaiting_head = False
        self._stop_deadline()
        if self.transport.is_closing():
            return
        self._report(status, reason)
        self.logger.warning("%s (%d); connection closed", message, status)
        body = message.encode("ascii")
        self.transport.write(
            b"".join(
                [
                    STATUS_LINE[status],
                    b"content-type: text/plain; charset=utf-8\r\n",
                    b"content-length: %d\r\n" % len(body),
                    b"connection: close\r\n\r\n",
                    body,
                ]
            )
        )
        self.transport.close()


class HeldWrites:
    """A transport that sends an answer's head together with what follows it.

    uvicorn writes an answer's head and its body with two `write` calls: two send(2) calls,
    two segments, and the client's reader wakes twice for one answer (aiohttp's server
    holds the head back until the first body bytes). Here the first write of each request
    (`hold_next`, set when its head has been read) is held until the next write or the end
    of the current turn of the event loop (`call_soon`), whichever comes first, and then
    both go to the real transport at once with `writelines` (one writev). Later writes
    (the pieces of a streamed answer) pass straight through. Nothing is reordered or
    rewritten; `close` sends what is held first, `abort` drops it as the transport would;
    everything else is the real transport's.
    """

    __slots__ = ("_held", "_hold_next", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._hold_next = False

    def hold_next(self) -> None:
        """Hold the next write (a head) for the write that follows it."""
        self._hold_next = True

    def write(self, data: bytes) -> None:
        if self._held:
            self._held.append(data)
            self.flush()
        elif self._hold_next:
            self._hold_next = False
            self._held.append(data)
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def writelines(self, data: Any) -> None:
        for part in data:
            self.write(part)

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, []
            if not self._transport.is_closing():
                self._transport.writelines(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ProxyServerConfig(uvicorn.Config):
    """uvicorn's Config for the proxy: our protocol, our limits, our quiet defaults."""

    def __init__(self, app: Any, settings: ProxySettings, **options: Any) -> None:
        self.head_timeout_s = settings.header_timeout_s
        self.max_head_bytes = settings.max_header_bytes
        self.body_timeout_s = settings.body_timeout_s
        defaults: dict[str, Any] = {
            "host": settings.host,
            "port": settings.port,
            "http": GuardedHttpToolsProtocol,
            "timeout_keep_alive": settings.keepalive_timeout_s,
            "access_log": False,  # our own lines carry no query strings or headers
            "server_header": False,
            "date_header": False,
            "proxy_headers": False,  # nothing sits in front of us: no X-Forwarded-* rewriter
            "lifespan": "on",
            "ws": "none",
        }
        super().__init__(app, **{**defaults, **options})


def header_problem(headers: list[tuple[bytes, bytes]], settings: ProxySettings) -> str | None:
    """Why a request's headers exceed the limits, or None (checked before anything else)."""
    if len(headers) > settings.max_header_count:
        return (
            f"tokenlens proxy: the request has {len(headers)} headers; the limit is "
            f"{settings.max_header_count} (--max-header-count)"
        )
    size = sum(len(name) + len(value) + 4 for name, value in headers)  # "name: value\r\n"
    if size > settings.max_header_bytes:
        return (
            f"tokenlens proxy: the request's headers take {size} bytes; the limit is "
            f"{settings.max_header_bytes} (--max-header-bytes)"
        )
    return None

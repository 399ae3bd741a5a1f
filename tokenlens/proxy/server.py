"""The proxy's server side: uvicorn's settings, and the limits uvicorn does not have.

uvicorn (httptools) gives us an idle keep-alive timeout (`timeout_keep_alive`) but no
deadline for a request's head to arrive and no cap on its size: a client trickling one
header byte at a time holds a connection forever (slowloris), and a 4 MB header is read
whole into memory. uvicorn's maintainers chose not to add these (its issue #157), so
`GuardedHttpToolsProtocol` adds two things to uvicorn's own protocol class, which
uvicorn accepts through `Config(http=...)` (`ProxyServerConfig` sets it up, and carries
the limits with it, also to worker processes):

- a deadline for the head: from the moment the connection opens, or the first byte of
  the next request on a kept-alive connection, until the request's headers are
  complete; past it the client gets `408` and the connection closes (a new connection
  that sends nothing is closed; an idle kept-alive one is uvicorn's keep-alive timeout's);
- a cap on the bytes received while the head is incomplete (a memory bound); past it the
  client gets `431`.

Parsing stays uvicorn's and httptools'; these are a timer and a byte count. The exact
limits (header count and total size) are checked on the parsed headers at the ASGI
level (`header_problem`), where the answer can be an Anthropic-shaped error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from tokenlens.proxy.settings import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_HEADER_BYTES,
    ProxySettings,
)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head deadline and a head size cap."""

    _head_timer: asyncio.TimerHandle | None = None
    _awaiting_head = False  # between requests: the next bytes start a request's head
    _head_bytes = 0

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        limits = config if isinstance(config, ProxyServerConfig) else None
        self.head_timeout_s = limits.head_timeout_s if limits else DEFAULT_HEADER_TIMEOUT_S
        self.max_head_bytes = limits.max_head_bytes if limits else DEFAULT_MAX_HEADER_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()
        self._start_deadline()  # uvicorn has no timer for a connection that says nothing

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        awaiting = self._awaiting_head
        if awaiting:
            if self._head_timer is None:
                self._start_deadline()  # the first byte of a kept-alive connection's next head
            self._head_bytes += len(data)
        super().data_received(data)
        if awaiting and self._awaiting_head and self._head_bytes > self.max_head_bytes:
            self._refuse(431, "Request header fields too large.")

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._stop_deadline()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete
        if idle and not self.transport.is_closing():
            self._await_head()  # idle until then: uvicorn's keep-alive timeout applies

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
            self._refuse(408, "Request headers not received in time.")
        elif not self.transport.is_closing():
            self.transport.close()  # nothing was asked: nothing to answer

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with a one-line reason and close, as uvicorn answers a 400."""
        self._awaiting_head = False
        self._stop_deadline()
        if self.transport.is_closing():
            return
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


class ProxyServerConfig(uvicorn.Config):
    """uvicorn's Config for the proxy: our protocol, our limits, our quiet defaults."""

    def __init__(self, app: Any, settings: ProxySettings, **options: Any) -> None:
        self.head_timeout_s = settings.header_timeout_s
        self.max_head_bytes = settings.max_header_bytes
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

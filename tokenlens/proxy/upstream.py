"""The relay's own connection to the upstream: one httpcore pool, no httpx client layer.

Why not `httpx.AsyncClient.send` on the hot path: its URL parsing, header merging, auth,
redirect, cookie-jar and event-hook layers cost more per relayed request than the rest of
the proxy, and a proxy needs none of them (a shared cookie jar would even carry one
client's cookies into another's requests). Bodies go out as given, responses come back
raw (transfer-decoded, still content-encoded). Background calls keep the httpx client.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from urllib.parse import urlsplit

import httpcore
import httpx

#: What a failed upstream exchange raises, from either side of the seam.
TIMEOUT_ERRORS: tuple[type[Exception], ...] = (httpcore.TimeoutException, httpx.TimeoutException)
UPSTREAM_ERRORS: tuple[type[Exception], ...] = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.TimeoutException,
    httpcore.UnsupportedProtocol,
    httpx.HTTPError,
)

Headers = list[tuple[bytes, bytes]]
Content = bytes | AsyncIterator[bytes]


class UpstreamResponse:
    """What the relay reads of an upstream answer: status, raw headers, raw body chunks."""

    def __init__(self, response: httpcore.Response) -> None:
        self._response = response
        self.status = response.status
        self.headers: Sequence[tuple[bytes, bytes]] = response.headers

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        stream = self._response.stream
        assert isinstance(stream, AsyncIterable)
        async for chunk in stream:
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class Upstream:
    """Sends one relayed request to `base` (scheme, host, port and an optional path prefix)."""

    def __init__(
        self,
        base: str,
        *,
        timeout_s: float,
        connect_timeout_s: float = 10.0,
        max_keepalive: int = 200,
    ) -> None:
        parts = urlsplit(base)
        self._scheme = parts.scheme.encode("ascii")
        host = parts.hostname or ""
        self._host = host.encode("idna")
        default_port = 443 if parts.scheme == "https" else 80
        self._port = parts.port or default_port
        netloc = host if ":" not in host else f"[{host}]"
        if parts.port not in (None, default_port):
            netloc += f":{parts.port}"
        self._host_header = netloc.encode("idna")
        self._prefix = parts.path.rstrip("/").encode("latin-1")
        self._timeouts = {
            "connect": connect_timeout_s,
            "read": timeout_s,
            "write": timeout_s,
            "pool": timeout_s,
        }
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context() if parts.scheme == "https" else None,
            max_connections=None,
            max_keepalive_connections=max_keepalive,
            keepalive_expiry=5.0,
            http1=True,
            http2=False,
        )

    async def send(
        self, method: str, target: bytes, headers: Headers, content: Content
    ) -> UpstreamResponse:
        """Send `headers` as given plus `host` and the body framing; raises UPSTREAM_ERRORS."""
        out = [(b"host", self._host_header), *headers]
        if isinstance(content, bytes):
            if content:
                out.append((b"content-length", str(len(content)).encode("ascii")))
        elif not any(name.lower() == b"content-length" for name, _ in headers):
            out.append((b"transfer-encoding", b"chunked"))
        core = httpcore.Request(
            method.encode("ascii"),
            httpcore.URL(
                scheme=self._scheme, host=self._host, port=self._port, target=self._prefix + target
            ),
            headers=out,
            content=content,
            extensions={"timeout": self._timeouts},
        )
        return UpstreamResponse(await self._pool.handle_async_request(core))

    async def aclose(self) -> None:
        await self._pool.aclose()


def header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header `name` (lower-case), or None."""
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None

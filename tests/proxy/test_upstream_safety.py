"""Issue 24: no client ever receives an answer that was not read for its own request.

A scripted upstream (`scripted.Scripted`) misbehaves on purpose: it sends an extra,
unrequested answer a moment after a complete one on a kept-alive connection, or an answer
whose header the server in front of the client would refuse to write. Clients talk to
the proxy over real HTTP on loopback, each on its own connection.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tokenlens.proxy.settings import ProxySettings
from tokenlens.proxy.upstream import idle_socket_state
from tokenlens.testing.workers import wait_for

from .conftest import ProxyServer
from .scripted import Conn, Scripted, reply

StartProxy = Callable[..., ProxyServer]
#: How long after its real answer the upstream sends the stray one.
STRAY_AFTER_S = 0.05


#: A second, complete answer nobody asked for; and the start of one that never ends.
STRAY = reply(body=b"STRAY, meant for nobody", headers=[(b"x-stray", b"1")])
STRAY_HEAD = b"HTTP/1.1 200 OK\r\nx-stray: 1\r\n"


class _Strays:
    """How many strays the upstream has sent: a test waits for its stray to be on the wire
    instead of sleeping a fixed time (a loaded CI machine can take longer than any guess)."""

    def __init__(self) -> None:
        self.sent = 0

    def wait_for(self, count: int) -> None:
        wait_for(
            lambda: self.sent >= count,
            10,
            lambda: f"stray {count} (the upstream sent {self.sent})",
            every=0.01,
        )
        time.sleep(STRAY_AFTER_S)  # loopback delivers it at once; a margin all the same


def _answering_then(stray: bytes | None, strays: _Strays | None = None) -> Callable[[Conn], Any]:
    """Answers each request with its own target, then (while the connection is idle, after
    STRAY_AFTER_S) sends `stray`, if any, and counts it in `strays`."""

    async def handler(conn: Conn) -> None:
        while (request := await conn.read_request()) is not None:
            await conn.send(reply(body=b"answer to " + request.target))
            if stray is not None:
                await asyncio.sleep(STRAY_AFTER_S)
                await conn.send(stray)
                if strays is not None:
                    strays.sent += 1

    return handler


def test_a_stray_answer_on_an_idle_connection_never_reaches_another_client(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    strays = _Strays()
    srv = upstream(_answering_then(STRAY, strays))
    proxy = start_proxy(ProxySettings(upstream=srv.url))
    trials = 5
    for trial in range(trials):
        # two clients, each on a connection of its own to the proxy
        with httpx.Client(base_url=proxy.base_url) as alice:
            got = alice.get(f"/alice/{trial}")
        assert got.content == f"answer to /alice/{trial}".encode()
        strays.wait_for(2 * trial + 1)  # the stray answer has reached the pooled connection
        with httpx.Client(base_url=proxy.base_url) as bob:
            got = bob.post(f"/bob/{trial}", content=b"bob's question")
        assert "x-stray" not in got.headers
        assert got.content == f"answer to /bob/{trial}".encode(), got.content
        strays.wait_for(2 * trial + 2)  # (a stray sent as a request goes out IS its answer)
    # every request went out on a connection of its own: none was reused after the stray
    assert [r.connection for r in srv.requests] == list(range(2 * trials))
    assert srv.wait_ended(2 * trials - 1)  # the proxy closed each poisoned one it met


def test_an_incomplete_stray_head_is_never_part_of_an_answer(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    strays = _Strays()
    srv = upstream(_answering_then(STRAY_HEAD, strays))
    proxy = start_proxy(ProxySettings(upstream=srv.url))
    for sent, name in enumerate(("alice", "bob", "carol"), start=1):
        with httpx.Client(base_url=proxy.base_url) as client:
            got = client.get(f"/{name}")
        assert (got.status_code, got.content) == (200, f"answer to /{name}".encode())
        assert "x-stray" not in got.headers
        strays.wait_for(sent)


def test_what_waits_on_an_idle_socket_is_told_apart() -> None:
    """The kernel half of the check at reuse, on a socket pair: nothing, data, a close."""

    class Transport(asyncio.BaseTransport):
        def __init__(self, sock: socket.socket) -> None:
            super().__init__()
            self.sock = sock

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return self.sock if name == "socket" else default

    ours, theirs = socket.socketpair()
    with ours, theirs:
        transport = Transport(ours)
        assert idle_socket_state(transport) is None
        theirs.sendall(b"HTTP/1.1 200 OK\r\n")
        assert idle_socket_state(transport) == "data"
        ours.recv(100)
        theirs.shutdown(socket.SHUT_WR)
        assert idle_socket_state(transport) == "closed"
    assert idle_socket_state(None) is None


def test_a_clean_idle_connection_is_still_reused(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    """The check at reuse costs no connection when nothing arrived while idle."""
    srv = upstream(_answering_then(None))
    proxy = start_proxy(ProxySettings(upstream=srv.url))
    for name in ("alice", "bob", "carol"):
        with httpx.Client(base_url=proxy.base_url) as client:
            assert client.get(f"/{name}").content == f"answer to /{name}".encode()
        time.sleep(STRAY_AFTER_S * 2)
    assert srv.connections == 1


def test_a_stray_answer_is_counted_in_metrics(
    upstream: Callable[..., Scripted], start_proxy: StartProxy
) -> None:
    strays = _Strays()
    srv = upstream(_answering_then(STRAY, strays))
    proxy = start_proxy(ProxySettings(upstream=srv.url))
    with httpx.Client(base_url=proxy.base_url) as client:
        client.get("/one")
        strays.wait_for(1)
        client.get("/two")
        metrics = client.get("/metrics").text
    assert 'tokenlens_upstream_connections_discarded_total{reason="unread_bytes"} 1.0' in metrics


def _answers_with_header(value: bytes) -> Callable[[Conn], Any]:
    async def handler(conn: Conn) -> None:
        while await conn.read_request() is not None:
            await conn.send(reply(body=b'{"ok": true}', headers=[(b"x-upstream-note", value)]))

    return handler


@pytest.mark.parametrize("value", [b"bad\x01value", b"bell\x07", b"del\x7f"])
def test_an_upstream_header_the_server_cannot_write_is_a_json_502(
    upstream: Callable[..., Scripted], start_proxy: StartProxy, value: bytes
) -> None:
    srv = upstream(_answers_with_header(value))
    proxy = start_proxy(ProxySettings(upstream=srv.url))
    with httpx.Client(base_url=proxy.base_url) as client:
        got = client.post("/v1/messages", content=b'{"model": "m"}')
        assert got.status_code == 502
        error = json.loads(got.content)
        assert error["type"] == "error" and error["error"]["type"] == "api_error"
        assert "header" in error["error"]["message"]
        again = client.post("/v1/messages/count_tokens", content=b"{}")  # same connection
        assert again.status_code == 502
        metrics = client.get("/metrics").text
    line = 'tokenlens_outcome_reasons_total{outcome="upstream_error",reason="bad_header"} 2.0'
    assert line in metrics


def test_a_bad_upstream_header_is_logged_without_its_value(
    upstream: Callable[..., Scripted],
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    srv = upstream(_answers_with_header(b"secret-ish\x01text"))
    proxy = start_proxy(ProxySettings(upstream=srv.url))
    with httpx.Client(base_url=proxy.base_url) as client:
        assert client.get("/anything").status_code == 502
    logged = [r.getMessage() for r in caplog.records if r.name == "tokenlens.proxy"]
    assert any("header" in line and "502" in line for line in logged), logged
    assert not any("secret-ish" in line for line in logged)

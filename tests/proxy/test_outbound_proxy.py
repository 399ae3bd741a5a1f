"""`HTTPS_PROXY` and `NO_PROXY` for the upstream, through a real CONNECT proxy on loopback.

The outbound proxy is proxy.py (the one aiohttp's own tests use), run as a process; its
access log says which tunnels it opened. The upstream speaks TLS (a trustme CA, trusted
through `SSL_CERT_FILE`), so the relay must tunnel with CONNECT, not just forward.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from tokenlens.proxy.settings import ProxySettings

from .conftest import KEY, ProxyServer, free_port
from .scripted import Scripted, answering, reply

StartProxy = Callable[..., ProxyServer]


@pytest.fixture
def tls_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scripted]:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    srv = Scripted(
        answering(lambda r: reply(body=json.dumps({"via": "upstream"}).encode())), server
    )
    yield srv.start()
    srv.stop()


@pytest.fixture
def connect_proxy(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """proxy.py on 127.0.0.1 (its own process, so its log is its own): port and access log."""
    log = tmp_path / "proxy.log"
    port = free_port()
    args = ["--hostname", "127.0.0.1", "--port", str(port), "--num-workers", "1"]
    args += ["--num-acceptors", "1", "--log-file", str(log), "--log-level", "INFO"]
    process = subprocess.Popen([sys.executable, "-m", "proxy", *args])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("proxy.py did not start") from None
                time.sleep(0.05)
        yield port, log
    finally:
        process.terminate()
        process.wait(10)


def _tunnels(log: Path, port: int) -> int:
    """How many CONNECT tunnels to localhost:`port` proxy.py logged (it logs on close)."""
    deadline = time.monotonic() + 5
    count = 0
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        count = text.count(f"CONNECT localhost:{port} ")
        if count:
            break
        time.sleep(0.05)
    return count


def test_https_proxy_is_honoured_for_the_upstream(
    tls_upstream: Scripted,
    connect_proxy: tuple[int, Path],
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port, log = connect_proxy
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    relay = start_proxy(ProxySettings(upstream=f"https://localhost:{tls_upstream.port}"))
    got = httpx.get(f"{relay.base_url}/v1/models", headers={"x-api-key": KEY})
    assert got.json() == {"via": "upstream"}
    relay.stop()  # closes the kept-alive tunnel, so proxy.py logs it
    assert _tunnels(log, tls_upstream.port) == 1


def test_no_proxy_is_respected(
    tls_upstream: Scripted,
    connect_proxy: tuple[int, Path],
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port, log = connect_proxy
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "localhost")
    relay = start_proxy(ProxySettings(upstream=f"https://localhost:{tls_upstream.port}"))
    got = httpx.get(f"{relay.base_url}/v1/models", headers={"x-api-key": KEY})
    assert got.json() == {"via": "upstream"}
    relay.stop()
    assert _tunnels(log, tls_upstream.port) == 0


def test_an_unreachable_https_proxy_is_a_502_not_a_direct_connection(
    tls_upstream: Scripted, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{free_port()}")
    relay = start_proxy(ProxySettings(upstream=f"https://localhost:{tls_upstream.port}"))
    got = httpx.get(f"{relay.base_url}/v1/models", headers={"x-api-key": KEY})
    assert got.status_code == 502
    assert tls_upstream.connections == 0

"""Fixtures for the proxy tests: the proxy on loopback, a byte-recording upstream, policies.

The proxy runs in-process (uvicorn in a thread, like the loopback Anthropic server) so a
test can read its counters directly and inject a compressor; one test also runs the real
`tokenlens serve` command in a subprocess.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tokenlens.policy import Policy, PolicyEntry, write_policy
from tokenlens.proxy.app import create_app
from tokenlens.proxy.server import ProxyServerConfig
from tokenlens.proxy.settings import DEFAULT_COMPRESS_BUDGET_MS, ProxySettings
from tokenlens.proxy.state import ProxyState

from .scripted import Handler, Scripted

MODEL = "claude-haiku-4-5"
KEY = "sk-ant-test-proxy-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ThreadServer:
    """An ASGI app served by uvicorn on 127.0.0.1 in a daemon thread."""

    def __init__(self, app: Any, settings: ProxySettings | None = None) -> None:
        self.app = app
        self.port = free_port()
        options: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "log_level": "warning",
            "timeout_graceful_shutdown": 1,
        }
        if settings is None:
            config = uvicorn.Config(app, access_log=False, lifespan="on", ws="none", **options)
        else:  # the proxy, served as `tokenlens serve` serves it
            config = ProxyServerConfig(app, settings, **options)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class ProxyServer(ThreadServer):
    @property
    def state(self) -> ProxyState:
        state: ProxyState = self.app.state.proxy
        return state

    def feed(self) -> dict[str, Any]:
        response = httpx.get(f"{self.base_url}/tokenlens/feed.json", timeout=5)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until background jobs (measure, shadow judge) are done."""
        deadline = time.monotonic() + timeout
        while self.state.background.pending:
            if time.monotonic() > deadline:
                raise AssertionError("background work did not finish")
            time.sleep(0.02)


@pytest.fixture
def start_proxy() -> Iterator[Callable[..., ProxyServer]]:
    """`start_proxy(settings, **create_app_kwargs)` -> a running ProxyServer."""
    servers: list[ProxyServer] = []

    def start(settings: ProxySettings, **kwargs: Any) -> ProxyServer:
        if settings.compress_budget_ms == DEFAULT_COMPRESS_BUDGET_MS:
            # A loaded CI machine must not turn `applied` into a budget fail-open in tests
            # that are not about the budget (those set their own).
            settings = dataclasses.replace(settings, compress_budget_ms=10_000.0)
        server = ProxyServer(create_app(settings, **kwargs), settings).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# --- an upstream that records raw bytes ----------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RecordingUpstream:
    """Records exactly what arrives (bytes, headers, query) and answers a fixed message."""

    seen: list[Seen] = field(default_factory=list)

    def app(self) -> Starlette:
        async def record(request: Request) -> Response:
            self.seen.append(
                Seen(
                    request.method,
                    request.url.path,
                    request.url.query,
                    dict(request.headers),
                    await request.body(),
                )
            )
            if request.url.path == "/v1/messages":
                return JSONResponse(
                    {
                        "id": "msg_rec",
                        "type": "message",
                        "role": "assistant",
                        "model": MODEL,
                        "content": [{"type": "text", "text": "recorded"}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": 3, "output_tokens": 1},
                    },
                    headers={"request-id": "req_rec"},
                )
            return JSONResponse({"path": request.url.path}, headers={"x-upstream": "yes"})

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
        return Starlette(routes=[Route("/{path:path}", record, methods=methods)])


@pytest.fixture
def recording_upstream() -> Iterator[tuple[RecordingUpstream, ThreadServer]]:
    recorder = RecordingUpstream()
    server = ThreadServer(recorder.app()).start()
    yield recorder, server
    server.stop()


# --- a scripted upstream (exact bytes; see scripted.py) -----------------------------------


@pytest.fixture
def upstream() -> Iterator[Callable[..., Scripted]]:
    """`upstream(handler)` -> a running `Scripted` upstream, stopped after the test."""
    servers: list[Scripted] = []

    def start(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> Scripted:
        server = Scripted(handler, ssl_context).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# --- policies ------------------------------------------------------------------------


def entry(
    task_class: str,
    verdict: str,
    method: str = "none",
    rate: float | None = None,
    bar: float | None = 0.9,
) -> PolicyEntry:
    return PolicyEntry(
        task_class=task_class,
        verdict=verdict,  # type: ignore[arg-type]
        method=method,
        rate=rate,
        bar=bar,
        retention_mean=0.97 if verdict != "none" else None,
        reason=f"test entry for {task_class}",
    )


def make_policy(
    classes: dict[str, PolicyEntry], default: PolicyEntry | None = None, cid: str = "cal-00000001"
) -> Policy:
    return Policy(
        created=datetime(2026, 11, 1, tzinfo=UTC),
        calibration_id=cid,
        model=MODEL,
        judge="metric",
        tolerance=0.95,
        mode="interval",
        classes=classes,
        default=default or entry("default", "none"),
    )


def standard_policy(cid: str = "cal-00000001") -> Policy:
    """extraction ✓ prune@0.5, summarization ? prune@0.5, code-context — (none)."""
    return make_policy(
        {
            "extraction": entry("extraction", "measured", "prune", 0.5),
            "summarization": entry("summarization", "provisional", "prune", 0.5),
            "code-context": entry("code-context", "none"),
        },
        cid=cid,
    )


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    write_policy(standard_policy(), tmp_path / "policy")
    return tmp_path / "policy" / "latest.json"


LONG_CONTEXT = "\n\n".join(
    f"Paragraph {i}. The   quarterly   report for region {i} lists revenue of {i * 1000} "
    f"dollars,   and the   manager of region {i} is named Person{i}. Nothing else of note "
    f"happened in region {i} this quarter, according to   the   filing."
    for i in range(1, 25)
)


def messages_body(question: str = "Who manages region 7?", **extra: Any) -> dict[str, Any]:
    """A body shaped like the calibration's tasks: context block + question block."""
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 200,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": LONG_CONTEXT},
                    {"type": "text", "text": question},
                ],
            }
        ],
    }
    body.update(extra)
    return body


# --- SDK clients that get closed --------------------------------------------------------

SdkFor = Callable[[ProxyServer], anthropic.Anthropic]


@pytest.fixture
def sdk_for() -> Iterator[Callable[[ProxyServer], anthropic.Anthropic]]:
    """`sdk_for(proxy)`: an SDK client aimed at the proxy, closed after the test."""
    clients: list[anthropic.Anthropic] = []

    def make(proxy: ProxyServer) -> anthropic.Anthropic:
        client = anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()

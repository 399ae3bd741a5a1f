"""Latency and CPU the proxy adds over the floor of its stack, and beside a peer.

One file past 500 lines on purpose: a bench is run and read as one script, and its targets,
clients and tables share one measurement loop (agent traffic lives in bench_proxy_agent.py).

Processes on loopback: a canned upstream; the proxy (`tokenlens serve`, pass-through unless
`--policy-arm`); the floor, a minimal aiohttp byte forwarder on uvloop with no policy, no
limits and no metrics (what a relay on aiohttp costs at the least), and the same forwarder
as a bare ASGI app on uvicorn (`floor-uv`: the proxy's own server stack, so ours minus it is
our own code); with `--peer litellm`,
LiteLLM's proxy (its Anthropic pass-through route) in a bench-only virtualenv outside the
repo; and this client, a minimal keep-alive probe (so the figures are the proxies', not the
client's), plus httpx, the SDK's HTTP stack, for one row. Every client cycles through all
targets (direct, floor, ours, peer) request by request, so they all see the same machine
load; "over the floor" is ours minus the floor at each percentile, measured in the same
run. The peer gets its own table after the main rounds (at ~10x our CPU it would load the
machine under the ours-vs-floor rows). On a 2-core machine the client, the proxies and the
upstream share the cores: only figures against the floor (or direct) in the same run mean
anything. The load average is printed beside them. Prints figures; asserts nothing.

Goals (issue 27): ours <= +0.15 ms p50 over the floor at 1 and at 50 in flight (50 ms
upstream), streaming time-to-first-byte <= +0.15 ms over the floor, proxy CPU per streamed
request <= 1.5x per plain request.

    .venv/bin/python bench/bench_proxy.py [--requests 2000] [--rounds 3] [--peer litellm]
        [--baseline DIR] [--policy-arm prune@0.5] [--workers 2] [--capture | --capture-only]
        [--quick]

`--peer headroom` runs `bench/bench_proxy_agent.py`: agent traffic through `tokenlens serve
--compress-tools` beside `headroom proxy` (headroom-ai in a throwaway virtualenv, offline).
`--quick`: a few requests per row, one round, no start-up or httpx rows: a smoke run in
seconds (the test suite runs it). `--peer litellm` installs `litellm[proxy]` once into
`~/.cache/tokenlens/bench-litellm` (about a minute, PyPI) and runs it offline
(`LITELLM_LOCAL_MODEL_COST_MAP`, telemetry off, a master key), one worker, against the same
upstream. `--capture` adds rows for `serve --capture` at 100 % sampling against capture off
(goal: within 0.2 ms at p50). `--capture-only` runs just those rows. `--baseline DIR`
also runs the proxy of another source tree (a folder holding a `tokenlens` package) among
the targets: before vs after in one run. `--rounds 0 --peer litellm`: the peer table only.

Why one script past 400 lines: a bench is run as one file (`python bench/bench_proxy.py`);
its upstream, floor, peer, probe client and rows are only meaningful together.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httptools
import httpx

MODEL = "claude-haiku-4-5"
HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
CONTEXT = " ".join(f"Fact {i}: item {i} costs {i * 3} dollars." for i in range(40))
BODY: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 64,
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": CONTEXT},
                {"type": "text", "text": "What does item 7 cost?"},
            ],
        }
    ],
}
FAKE_SCRIPT = """
import sys, time
from tokenlens.testing import FakeAnthropic
server = FakeAnthropic(stream_delay_s=float(sys.argv[1])).start()
print(server.port, flush=True)
time.sleep(1e9)
"""
#: Requests whose body carries this marker wait `latency` at the canned upstream (the
#: 50-in-flight rows); every proxy forwards the body, so one upstream serves all rows.
SLOW_MARKER = "bench-slow"
#: A request not answered in this time, or whose connection closed under it, is counted as
#: unanswered (not a latency figure) and its connection replaced: a relay that stalls shows
#: as a count, not as a hung run.
REQUEST_TIMEOUT_S = 15.0
SLOW_BODY: dict[str, Any] = {**BODY, "metadata": {"user_id": SLOW_MARKER}}
#: A canned upstream: answers every request with the same message (or SSE events) at almost
#: no CPU cost, so the figures show the proxies' cost and not the fake model's.
CANNED_SCRIPT = r"""
import asyncio, json, sys
delay, latency = float(sys.argv[1]), float(sys.argv[2])
message = json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
    "model": "claude-haiku-4-5", "content": [{"type": "text", "text": "Item 7 costs 21."}],
    "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 300, "output_tokens": 6}}).encode()
events = [("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 300}}}),
          ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": "Item 7 costs 21."}}),
          ("message_stop", {"type": "message_stop"})]
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length)
            if latency and b"bench-slow" in body:
                await asyncio.sleep(latency)
            if b'"stream":true' in body.replace(b" ", b""):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                for name, data in events:
                    chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
                    await asyncio.sleep(delay)
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(message), message))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""
#: The floor: the least a relay on our stack (aiohttp's client on uvloop) can do. Bytes in,
#: bytes out, hop-by-hop headers dropped, whole answers buffered and event streams relayed
#: chunk by chunk, as ours does; no policy, limits, metrics, safety checks or logging.
FLOOR_SCRIPT = r"""
import asyncio, sys
import aiohttp, uvloop
from aiohttp import web
upstream, port = sys.argv[1], int(sys.argv[2])
DROP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te",
        "trailer", "upgrade", "proxy-connection", "proxy-authorization", "proxy-authenticate",
        "expect"}
async def forward(request):
    body = await request.read()
    headers = [(k, v) for k, v in request.headers.items() if k.lower() not in DROP]
    answer = await request.app["session"].request(
        request.method, upstream + request.raw_path, headers=headers, data=body or None)
    out = [(k, v) for k, v in answer.headers.items() if k.lower() not in DROP]
    if answer.content_length is not None and answer.content_type != "text/event-stream":
        raw = await answer.read()
        return web.Response(status=answer.status, body=raw, headers=out)
    response = web.StreamResponse(status=answer.status, headers=out)
    await response.prepare(request)
    while chunk := await answer.content.readany():
        await response.write(chunk)
    answer.release()
    await response.write_eof()
    return response
async def main():
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    app["session"] = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=1024).start()
    print("ready", flush=True)
    await asyncio.Event().wait()
uvloop.run(main())
"""

#: The same floor on the proxy's own server stack: a bare ASGI app on uvicorn (httptools,
#: uvloop), no starlette, with the same aiohttp client. Ours minus this is our own code.
UVICORN_FLOOR_SCRIPT = r"""
import sys
import aiohttp, uvicorn
upstream, port = sys.argv[1], int(sys.argv[2])
DROP = {b"host", b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"te",
        b"trailer", b"upgrade", b"proxy-connection", b"proxy-authorization",
        b"proxy-authenticate", b"expect"}
session = None
async def app(scope, receive, send):
    global session
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"))
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k not in DROP]
    answer = await session.request(scope["method"], upstream + scope["raw_path"].decode(),
                                   headers=headers, data=body or None)
    out = [(k.lower(), v) for k, v in answer.raw_headers if k.lower() not in DROP]
    if answer.content_length is not None and answer.content_type != "text/event-stream":
        raw = await answer.read()
        out.append((b"content-length", b"%d" % len(raw)))
        await send({"type": "http.response.start", "status": answer.status, "headers": out})
        await send({"type": "http.response.body", "body": raw})
        return
    await send({"type": "http.response.start", "status": answer.status, "headers": out})
    while chunk := await answer.content.readany():
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    answer.release()
    await send({"type": "http.response.body", "body": b""})
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
            lifespan="on", server_header=False, date_header=False)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_upstream(
    kind: str, stream_delay_s: float, latency_s: float = 0.0
) -> tuple[subprocess.Popen[str], str]:
    """`latency_s`: the canned upstream waits this long before answering a request whose
    body carries `SLOW_MARKER`."""
    script = CANNED_SCRIPT if kind == "canned" else FAKE_SCRIPT
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(stream_delay_s), str(latency_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}"


def start_proxy(
    upstream: str, extra: list[str], source: Path | None = None
) -> tuple[subprocess.Popen[bytes], str, float]:
    """Start `tokenlens serve`; returns the process, its URL and seconds until it answered.

    `source`: a folder holding another `tokenlens` package (e.g. an older checkout) to run
    instead of the installed one (`python -m` puts the working folder first on the path)."""
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenlens",
            "serve",
            "--upstream",
            upstream,
            "--port",
            str(port),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=source,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(process, f"{url}/tokenlens/feed.json", "tokenlens serve")
    return process, url, time.perf_counter() - started


def wait_until_up(
    process: subprocess.Popen[Any], url: str, name: str, limit_s: float = 120
) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            httpx.get(url, timeout=1).raise_for_status()
            return
        except httpx.HTTPError:
            if process.poll() is not None:
                raise SystemExit(f"{name} exited during start-up") from None
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not answer within {limit_s:.0f} s") from None
            time.sleep(0.02)


def start_floor(upstream: str) -> tuple[subprocess.Popen[str], str]:
    """The minimal aiohttp forwarder (`FLOOR_SCRIPT`) in its own process."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", FLOOR_SCRIPT, upstream, str(port)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise SystemExit("the floor forwarder did not start")
    return process, f"http://127.0.0.1:{port}"


def start_uvicorn_floor(upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    """The same forwarder as a bare ASGI app on uvicorn (`UVICORN_FLOOR_SCRIPT`)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", UVICORN_FLOOR_SCRIPT, upstream, str(port)])
    url = f"http://127.0.0.1:{port}"
    wait_until_up(process, f"{url}/", "the uvicorn floor")
    return process, url


#: The peer's version, pinned: 1.107.0 was a compromised release (withdrawn from PyPI), and
#: the `[proxy]` extra of 1.110.x names a `litellm-proxy` package that PyPI does not have.
LITELLM_SPEC = "litellm[proxy]==1.106.12"
LITELLM_VENV = Path.home() / ".cache" / "tokenlens" / "bench-litellm"
LITELLM_KEY = "sk-bench-litellm-master"


def litellm_command() -> Path:
    """The `litellm` command of the bench-only virtualenv, installed on first use."""
    command = LITELLM_VENV / "bin" / "litellm"
    if command.exists():
        return command
    print(f"installing {LITELLM_SPEC} into {LITELLM_VENV} (once; about a minute)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
    subprocess.run(
        [str(LITELLM_VENV / "bin" / "python"), "-m", "pip", "install", "-q", LITELLM_SPEC],
        check=True,
    )
    return command


def start_litellm(upstream: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """LiteLLM's proxy, one worker, offline, its Anthropic pass-through aimed at `upstream`."""
    command = litellm_command()
    port = free_port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY_DISABLED": "True",
        "LITELLM_MASTER_KEY": LITELLM_KEY,
        "ANTHROPIC_API_BASE": upstream,
        "ANTHROPIC_API_KEY": "sk-bench",
    }
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(command), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(process, f"{url}/health/liveliness", "litellm")
    return process, url, time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def timed_post(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = await client.post(f"{url}/v1/messages", json=body, headers=HEADERS)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000


async def alternate_httpx(
    direct: str, proxy: str, *, requests: int
) -> tuple[list[float], list[float]]:
    """The SDK's own HTTP stack (httpx), one request at a time, alternating sides."""
    results: dict[str, list[float]] = {"direct": [], "proxy": []}
    async with httpx.AsyncClient(timeout=60) as client:
        for url in (direct, proxy):  # warm connections and code paths
            for _ in range(20):
                await timed_post(client, url, BODY)
        for i in range(requests):
            order = [("direct", direct), ("proxy", proxy)]
            if i % 2:
                order.reverse()
            for name, url in order:
                results[name].append(await timed_post(client, url, BODY))
    return results["direct"], results["proxy"]


class Probe(asyncio.Protocol):
    """A minimal keep-alive HTTP/1.1 client: writes a prebuilt request, times the answer.

    Why not httpx here: its own per-request CPU (~1.5 ms on this machine) competes with the
    proxy and upstream for the same 2 cores and buries a sub-millisecond difference in
    noise. The probe costs ~20 us, so "added" is the proxy's cost; the httpx row shows
    what an SDK client sees on top.
    """

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.first: asyncio.Future[float] | None = None
        self.done: asyncio.Future[float] | None = None
        self.status = 0
        self.error_body = b""
        #: The server closed the connection (e.g. its keep-alive timeout while this client
        #: waited on another target): the next request goes out on a new one.
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        if self.first is not None and not self.first.done():
            self.first.set_result(time.perf_counter())
        if self.status != 200:
            self.error_body += body

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_message_complete(self) -> None:
        if self.done is None or self.first is None:
            return
        if self.status != 200:
            error = SystemExit(
                f"bench request failed: HTTP {self.status}: {self.error_body[:300]!r}"
            )
            for future in (self.first, self.done):
                if not future.done():
                    future.set_exception(error)
            return
        if not self.first.done():
            self.first.set_result(time.perf_counter())
        self.done.set_result(time.perf_counter())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for future in (self.first, self.done):
            if future is not None and not future.done():
                future.set_exception(ConnectionResetError(f"bench connection lost ({exc!r})"))

    async def request(self, raw: bytes, *, first_byte: bool) -> float:
        """Milliseconds to the whole answer, or to the first body byte."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.first, self.done = loop.create_future(), loop.create_future()
        self.status, self.error_body = 0, b""
        started = time.perf_counter()
        self.transport.write(raw)
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            first = await self.first
            end = await self.done
        return ((first if first_byte else end) - started) * 1000

    @classmethod
    async def open(cls, url: str) -> Probe:
        parts = urlsplit(url)
        loop = asyncio.get_running_loop()
        _, probe = await loop.create_connection(cls, parts.hostname or "", parts.port or 80)
        return probe


def raw_request(
    body: dict[str, Any], path: str = "/v1/messages", headers: dict[str, str] | None = None
) -> bytes:
    payload = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in (headers or HEADERS).items())
    return (
        f"POST {path} HTTP/1.1\r\nhost: bench\r\n{head}"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode() + payload


@dataclass
class Target:
    """Somewhere the probe sends the same request: the upstream itself, or a relay."""

    name: str
    url: str
    process: subprocess.Popen[Any] | None = None
    path: str = "/v1/messages"
    headers: dict[str, str] = field(default_factory=lambda: dict(HEADERS))

    def raw(self, body: dict[str, Any]) -> bytes:
        return raw_request(body, self.path, self.headers)


async def cycle(
    targets: list[Target],
    body: dict[str, Any],
    *,
    requests: int,
    concurrency: int,
    first_byte: bool,
    stagger_s: float = 0.0,
    warm: int = 20,
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """`requests` per target, `concurrency` clients, each cycling through the targets.
    Returns the latencies and the count of unanswered requests per target.

    Client i starts `i / concurrency * stagger_s` late, so requests arrive spread over the
    upstream's answer time as real traffic does, not in a lock-step burst of 50. Each
    client rotates its starting target, so no target always follows another.
    """
    raws = {target.name: target.raw(body) for target in targets}
    results: dict[str, list[float]] = {target.name: [] for target in targets}
    unanswered = {target.name: 0 for target in targets}
    urls = {target.name: target.url for target in targets}
    per_client = max(1, requests // concurrency)

    async def client(index: int) -> None:
        probes = {target.name: await Probe.open(target.url) for target in targets}
        for name, probe in probes.items():  # warm connections and code paths
            for _ in range(warm):
                await probe.request(raws[name], first_byte=first_byte)
        await asyncio.sleep(index / concurrency * stagger_s)
        names = list(probes)
        for i in range(per_client):
            shift = (i + index) % len(names)
            for name in names[shift:] + names[:shift]:
                if probes[name].closed:
                    probes[name] = await Probe.open(urls[name])
                try:
                    ms = await probes[name].request(raws[name], first_byte=first_byte)
                except (TimeoutError, ConnectionResetError):  # counted, on a new connection
                    unanswered[name] += 1
                    stale = probes[name].transport
                    if stale is not None:
                        stale.close()
                    probes[name] = await Probe.open(urls[name])
                    continue
                results[name].append(ms)
        for probe in probes.values():
            assert probe.transport is not None
            probe.transport.close()

    await asyncio.gather(*(client(i) for i in range(concurrency)))
    return results, unanswered


def cpu_seconds(pid: int) -> float:
    """CPU time of process `pid` so far, all its threads (Linux /proc; NaN elsewhere).

    From each thread's `schedstat` (nanoseconds), not `stat` (10 ms ticks, too coarse for a
    few hundred requests of a few hundred microseconds)."""
    try:
        total = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            total += int((task / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")
    return total / 1e9


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


@dataclass
class Row:
    title: str
    concurrency: int
    first_byte: bool
    slow: bool


@dataclass
class Measured:
    """One row's latencies (ms) and relay CPU (us per relayed request) per target."""

    latencies: dict[str, list[float]]
    cpu_us: dict[str, float]
    unanswered: dict[str, int]

    def over(self, name: str, base: str, q: float) -> float:
        return pct(self.latencies[name], q) - pct(self.latencies[base], q)


def measure(
    row: Row, targets: list[Target], *, requests: int, latency_s: float, warm: int
) -> Measured:
    relays = [target for target in targets if target.process is not None]
    before = {t.name: cpu_seconds(t.process.pid) for t in relays if t.process is not None}
    latencies, unanswered = asyncio.run(
        cycle(
            targets,
            {**(SLOW_BODY if row.slow else BODY), **({"stream": True} if row.first_byte else {})},
            requests=requests,
            concurrency=row.concurrency,
            first_byte=row.first_byte,
            stagger_s=latency_s if row.slow else 0.0,
            warm=warm,
        )
    )
    cpu_us = {}
    for target in relays:
        assert target.process is not None
        relayed = len(latencies[target.name]) + warm * row.concurrency
        spent = cpu_seconds(target.process.pid) - before[target.name]
        cpu_us[target.name] = spent / relayed * 1e6
    return Measured(latencies, cpu_us, unanswered)


def print_row(row: Row, measured: Measured) -> None:
    """One row: every target's p50/p99, each relay over the one before it in the chain
    direct < floor < ours (and the peer over the floor), and each relay's CPU."""
    lat = measured.latencies
    n = len(lat["direct"])
    print(f"{row.title} (n={n} per target)")
    for name, values in lat.items():
        base = {"direct": None, "floor": "direct"}.get(name, "floor")
        line = f"  {name:<9}p50 {pct(values, 50):7.2f} p99 {pct(values, 99):7.2f} ms"
        if base is not None:
            line += (
                f"   over {base:<6} p50 {measured.over(name, base, 50):+7.3f} "
                f"p99 {measured.over(name, base, 99):+7.3f} ms"
            )
        if name in measured.cpu_us:
            line += f"   CPU {measured.cpu_us[name]:6.0f} us/req"
        if measured.unanswered[name]:
            line += (
                f"   {measured.unanswered[name]} unanswered (>{REQUEST_TIMEOUT_S:.0f} s or closed)"
            )
        print(line)


def print_goals(rows: list[Row], results: list[Measured], *, judge: bool = True) -> None:
    """Ours over the floor against the issue's goals, and the CPU ratio streamed/plain
    (the baseline's too, when `--baseline` is given). Also over the uvicorn floor: what
    our own code costs on the same server stack."""
    plain1, plain50, stream1 = results[0], results[1], results[2]
    relays = [name for name in ("ours", "baseline") if name in plain1.latencies]
    print("over the floor, p50 (goal for ours <= +0.150 ms); [over the uvicorn floor]:")
    for label, got in (("1 in flight", plain1), ("50 in flight", plain50), ("TTFB, 1", stream1)):
        values = "  ".join(
            f"{name} {got.over(name, 'floor', 50):+.3f} [{got.over(name, 'floor-uv', 50):+.3f}] ms"
            for name in relays
        )
        verdict = "met" if got.over("ours", "floor", 50) <= 0.15 else "MISSED"
        verdict = verdict if judge else "--quick: too few requests to judge"
        print(f"  {label:<13} {values}  ({verdict})")
    for name in ("floor", "floor-uv", *relays):
        plain, streamed = plain1.cpu_us[name], stream1.cpu_us[name]
        goal = "  (goal <= 1.5x)" if name == "ours" else ""
        print(
            f"CPU per streamed / plain request, 1 in flight, {name}: {streamed:.0f} / "
            f"{plain:.0f} us = {streamed / plain:.2f}x{goal}"
        )


def write_policy(arm: str, folder: Path) -> Path:
    """A one-class policy applying `arm` to everything (default entry), for the bench only."""
    method, _, rate = arm.partition("@")
    entry = {
        "task_class": "default",
        "verdict": "measured",
        "method": method,
        "rate": float(rate) if rate else None,
        "reason": "bench",
    }
    policy = {
        "schema_version": 1,
        "created": datetime.now(UTC).isoformat(),
        "calibration_id": "bench-policy",
        "model": MODEL,
        "judge": "bench",
        "tolerance": 0.95,
        "mode": "interval",
        "classes": {},
        "default": entry,
    }
    path = folder / "policy.json"
    path.write_text(json.dumps(policy))
    return path


def _sibling(name: str) -> Any:
    """Another bench script of this folder, as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per target per row")
    parser.add_argument("--rounds", type=int, default=3, help="times to measure the table")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.05,
        help="s the upstream takes to answer in the 50-in-flight rows (the real API takes "
        "far longer; with 0 s, 50 clients saturate the 2 cores and the row measures queueing)",
    )
    parser.add_argument("--stream-delay", type=float, default=0.005, help="s between SSE events")
    parser.add_argument(
        "--peer",
        choices=("litellm", "headroom"),
        default=None,
        help="also bench a peer (headroom: on agent traffic, bench/bench_proxy_agent.py)",
    )
    parser.add_argument("--policy-arm", default=None, help="also bench with this arm applied")
    parser.add_argument(
        "--workers", type=int, default=1, help="run the benched proxy with --workers N"
    )
    parser.add_argument(
        "--capture", action="store_true", help="also bench capture on (100 %%) vs off"
    )
    parser.add_argument(
        "--capture-only", action="store_true", help="only the capture on vs off rows"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="also bench the proxy of another source tree (a folder holding a `tokenlens` "
        "package, e.g. `git archive <commit> tokenlens | tar -x -C DIR`): before vs after "
        "in one run",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run in seconds: few requests, one round"
    )
    parser.add_argument(
        "--upstream",
        choices=("canned", "fake"),
        default="canned",
        help="canned: a fixed answer at ~no CPU (isolates the proxy); fake: the loopback "
        "Anthropic server (tokenlens.testing), realistic but CPU-hungry",
    )
    args = parser.parse_args()
    if args.peer == "headroom":  # agent traffic, its own upstreams and table
        agent = _sibling("bench_proxy_agent")
        agent.main(["--quick"] if args.quick else [])
        return
    warm = 20
    if args.quick:
        args.requests, args.rounds, warm = min(args.requests, 50), 1, 2
    print(
        f"bench_proxy {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: {os.cpu_count()} CPUs, load "
        f"average {load_average():.2f}; client, relays and {args.upstream} upstream share "
        f"them; proxy workers: {args.workers}\n"
    )
    upstream, upstream_url = start_upstream(args.upstream, args.stream_delay, args.latency)
    processes: list[subprocess.Popen[Any]] = [upstream]
    try:
        if args.capture_only:
            bench_capture(upstream_url, args, processes, warm)
            return
        if not args.quick:
            startups = []
            for _ in range(3):
                process, _, seconds = start_proxy(upstream_url, [])
                startups.append(seconds)
                process.terminate()
                process.wait()
            print(
                f"start-up (command to first answered request): median "
                f"{statistics.median(startups):.2f} s over 3 starts "
                f"{[round(s, 2) for s in startups]}\n"
            )
        floor, floor_url = start_floor(upstream_url)
        processes.append(floor)
        floor_uv, floor_uv_url = start_uvicorn_floor(upstream_url)
        processes.append(floor_uv)
        workers = ["--workers", str(args.workers)] if args.workers > 1 else []
        proxy, proxy_url, _ = start_proxy(upstream_url, workers)
        processes.append(proxy)
        if workers:
            time.sleep(3)  # the first worker answered; let the others finish starting
        targets = [
            Target("direct", upstream_url),
            Target("floor", floor_url, floor),
            Target("floor-uv", floor_uv_url, floor_uv),
            Target("ours", proxy_url, proxy),
        ]
        if args.baseline is not None:
            before, before_url, _ = start_proxy(upstream_url, workers, args.baseline.resolve())
            processes.append(before)
            targets.append(Target("baseline", before_url, before))
        late = f"{args.latency * 1000:.0f} ms upstream"
        rows = [
            Row("plain, 1 in flight", 1, False, False),
            Row(f"plain, 50 in flight, {late}", 50, False, True),
            Row("stream TTFB, 1 in flight", 1, True, False),
            Row(f"stream TTFB, 50 in flight, {late}", 50, True, True),
        ]
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_} (probe client), load average {load_average():.2f}")
            results = []
            for row in rows:
                requests = args.requests // 2 if row.first_byte else args.requests
                got = measure(row, targets, requests=requests, latency_s=args.latency, warm=warm)
                print_row(row, got)
                results.append(got)
            print_goals(rows, results, judge=not args.quick)
            if not args.quick:
                direct, via = asyncio.run(
                    alternate_httpx(upstream_url, proxy_url, requests=args.requests // 4)
                )
                d50, v50, d99, v99 = pct(direct, 50), pct(via, 50), pct(direct, 99), pct(via, 99)
                print(
                    f"httpx client, 1 in flight: direct p50 {d50:.2f} p99 {d99:.2f}, ours p50 "
                    f"{v50:.2f} p99 {v99:.2f}: added p50 {v50 - d50:+.2f} p99 {v99 - d99:+.2f} ms"
                )
            print(f"load average after round {round_}: {load_average():.2f}\n")
        if args.peer == "litellm":
            bench_peer(upstream_url, targets, rows, args, processes, warm)
        if args.policy_arm:
            bench_policy(upstream_url, args, processes, warm)
        if args.capture:
            bench_capture(upstream_url, args, processes, warm)
    finally:
        for process in processes:
            process.terminate()
            process.wait()


def bench_peer(
    upstream_url: str,
    targets: list[Target],
    rows: list[Row],
    args: argparse.Namespace,
    processes: list[Any],
    warm: int,
) -> None:
    """The same rows with LiteLLM's proxy cycled in beside the others (its own table: at
    ~10x our CPU per request it loads the machine, which would blur ours against the floor).
    """
    peer, peer_url, seconds = start_litellm(upstream_url)
    processes.append(peer)
    print(
        f"peer: litellm ({LITELLM_SPEC}, one worker, Anthropic pass-through) answered "
        f"{seconds:.1f} s after its command; load average {load_average():.2f}"
    )
    litellm = Target(
        "litellm",
        peer_url,
        peer,
        path="/anthropic/v1/messages",
        headers={**HEADERS, "x-api-key": LITELLM_KEY},
    )
    results = []
    for row in rows:
        requests = args.requests // 4 if row.first_byte else args.requests // 2
        got = measure(
            row, [*targets, litellm], requests=requests, latency_s=args.latency, warm=warm
        )
        print_row(row, got)
        results.append(got)
    print("added over direct, ours vs litellm (p50 / p99 ms):")
    for row, got in zip(rows, results, strict=True):
        ours = f"{got.over('ours', 'direct', 50):+.2f} / {got.over('ours', 'direct', 99):+.2f}"
        theirs = (
            f"{got.over('litellm', 'direct', 50):+.2f} / {got.over('litellm', 'direct', 99):+.2f}"
        )
        cpu = f"CPU {got.cpu_us['ours']:.0f} vs {got.cpu_us['litellm']:.0f} us/req"
        print(f"  {row.title:<42} ours {ours:<16} litellm {theirs:<20} {cpu}")
    print(f"load average after the peer rows: {load_average():.2f}\n")


def bench_policy(
    upstream_url: str, args: argparse.Namespace, processes: list[Any], warm: int
) -> None:
    """Pass-through against a proxy applying `--policy-arm` to every request."""
    with tempfile.TemporaryDirectory() as folder:
        policy = write_policy(args.policy_arm, Path(folder))
        compressing, url, _ = start_proxy(upstream_url, ["--policy", str(policy)])
        processes.append(compressing)
        targets = [Target("direct", upstream_url), Target("ours", url, compressing)]
        row = Row(f"policy {args.policy_arm}, 1 in flight", 1, False, False)
        got = measure(row, targets, requests=args.requests, latency_s=0.0, warm=warm)
        print(
            f"{row.title}: added over direct p50 {got.over('ours', 'direct', 50):+.2f} "
            f"p99 {got.over('ours', 'direct', 99):+.2f} ms, CPU {got.cpu_us['ours']:.0f} us/req"
        )
        feed = httpx.get(f"{url}/tokenlens/feed.json").json()
        timing = feed["compress_ms"]
        print(
            f"  compress_request inside the proxy: p50 {timing['p50']:.2f} ms, "
            f"p99 {timing['p99']:.2f} ms; reduction {feed['savings']['reduction']:.1%} "
            f"(the upstream also reads a shorter prompt)"
        )


def bench_capture(
    upstream_url: str, args: argparse.Namespace, processes: list[Any], warm: int
) -> None:
    """Capture on (every Messages request, redacted, written) against capture off."""
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "captures"
        off, off_url, _ = start_proxy(upstream_url, [])
        on, on_url, _ = start_proxy(
            upstream_url, ["--capture", str(store), "--capture-sample", "1"]
        )
        processes += [off, on]
        targets = [Target("off", off_url, off), Target("on", on_url, on)]
        for round_ in range(1, args.rounds + 1):
            print(f"capture round {round_}: capture off vs on (100 % sampled), 1 in flight")
            for title, first_byte, requests in (
                ("plain", False, args.requests),
                ("stream TTFB", True, args.requests // 2),
            ):
                got = measure(
                    Row(title, 1, first_byte, False),
                    targets,
                    requests=requests,
                    latency_s=0.0,
                    warm=warm,
                )
                off_ms, on_ms = got.latencies["off"], got.latencies["on"]
                print(
                    f"  {title:<12} n={len(on_ms):>4}  off p50 {pct(off_ms, 50):6.2f} p99 "
                    f"{pct(off_ms, 99):6.2f}  on p50 {pct(on_ms, 50):6.2f} p99 "
                    f"{pct(on_ms, 99):6.2f}  added p50 {got.over('on', 'off', 50):+6.3f} ms "
                    f"p99 {got.over('on', 'off', 99):+6.2f} ms  proxy CPU off "
                    f"{got.cpu_us['off']:4.0f} / on {got.cpu_us['on']:4.0f} us/req "
                    "(incl. the writer thread)"
                )
            print()
        on.terminate()  # drains the writer: count what it wrote
        on.wait()
        lines = sum(part.read_text().count("\n") for part in store.glob("capture-*.jsonl"))
        print(f"capture store: {lines} records written (redacted, mode 0600)")


if __name__ == "__main__":
    main()

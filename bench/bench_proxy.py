"""Added latency of the proxy vs going direct, streaming time-to-first-byte, and start-up.

Three processes on loopback: a canned upstream (or the loopback Anthropic server), the
proxy (`tokenlens serve`, pass-through unless `--policy-arm`), and this client: a minimal
keep-alive probe for the main rows (so the figures are the proxy's, not the client's)
and httpx, the SDK's HTTP stack, for one row. Each request goes direct and through the
proxy alternately, so both see the same machine load. "Added" is proxy minus direct at
each percentile. The whole table is measured `--rounds` times and every round printed,
because a shared VM's steal time moves sub-millisecond figures between rounds.

Goal (pass-through): <= 1 ms added at p50 and <= 5 ms at p99. Prints figures; asserts
nothing. On a 2-core machine the client, proxy and upstream compete for CPU, so at 50
concurrent the figures measure queueing on 2 cores as much as the proxy.

    .venv/bin/python bench/bench_proxy.py [--requests 2000] [--rounds 3] [--policy-arm prune@0.5]
        [--workers 2] [--capture | --capture-only]

`--capture` adds rows for `serve --capture` at 100 % sampling: a capture-off and a
capture-on proxy on the same upstream, requests alternating between them, "added" being
on minus off (goal: within 0.2 ms at p50). `--capture-only` runs just those rows.

Why one script past 400 lines: a bench is run as one file (`python bench/bench_proxy.py`);
its upstream, probe client and rows are only meaningful together.
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
#: A canned upstream: answers every request with the same message (or SSE events) at almost
#: no CPU cost, so the figures show the proxy's cost and not the fake model's.
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
            if latency:
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_upstream(
    kind: str, stream_delay_s: float, latency_s: float = 0.0
) -> tuple[subprocess.Popen[str], str]:
    """`latency_s`: the canned upstream waits this long before answering each request."""
    script = CANNED_SCRIPT if kind == "canned" else FAKE_SCRIPT
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(stream_delay_s), str(latency_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}"


def start_proxy(upstream: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], str, float]:
    """Start `tokenlens serve`; returns the process, its URL and seconds until it answered."""
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
    )
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            httpx.get(f"{url}/tokenlens/feed.json", timeout=1).raise_for_status()
            return process, url, time.perf_counter() - started
        except httpx.HTTPError:
            if process.poll() is not None:
                raise SystemExit("tokenlens serve exited during start-up") from None
            time.sleep(0.01)


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

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        if self.first is not None and not self.first.done():
            self.first.set_result(time.perf_counter())

    def on_message_complete(self) -> None:
        if self.parser.get_status_code() != 200:
            raise SystemExit(f"bench request failed: HTTP {self.parser.get_status_code()}")
        if self.done is not None:
            self.done.set_result(time.perf_counter())

    async def request(self, raw: bytes, *, first_byte: bool) -> float:
        """Milliseconds to the whole answer, or to the first body byte."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.first, self.done = loop.create_future(), loop.create_future()
        started = time.perf_counter()
        self.transport.write(raw)
        first = await self.first
        end = await self.done
        return ((first if first_byte else end) - started) * 1000

    @classmethod
    async def open(cls, url: str) -> Probe:
        parts = urlsplit(url)
        loop = asyncio.get_running_loop()
        _, probe = await loop.create_connection(cls, parts.hostname or "", parts.port or 80)
        return probe


def raw_request(body: dict[str, Any]) -> bytes:
    payload = json.dumps(body).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in HEADERS.items())
    return (
        f"POST /v1/messages HTTP/1.1\r\nhost: bench\r\n{head}"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode() + payload


async def alternate(
    direct: str,
    proxy: str,
    *,
    requests: int,
    concurrency: int,
    first_byte: bool,
    stagger_s: float = 0.0,
) -> tuple[list[float], list[float]]:
    """`requests` per side, `concurrency` workers, each alternating direct / proxy.

    Worker i starts `i / concurrency * stagger_s` late, so requests arrive spread over the
    upstream's answer time as real traffic does, not in a lock-step burst of 50.
    """
    raw = raw_request({**BODY, "stream": True} if first_byte else BODY)
    results: dict[str, list[float]] = {"direct": [], "proxy": []}
    per_worker = max(1, requests // concurrency)

    async def worker(index: int) -> None:
        probes = {"direct": await Probe.open(direct), "proxy": await Probe.open(proxy)}
        for probe in probes.values():  # warm connections and code paths
            for _ in range(20):
                await probe.request(raw, first_byte=first_byte)
        await asyncio.sleep(index / concurrency * stagger_s)
        for i in range(per_worker):
            order = ["direct", "proxy"] if (i + index) % 2 else ["proxy", "direct"]
            for name in order:
                results[name].append(await probes[name].request(raw, first_byte=first_byte))
        for probe in probes.values():
            assert probe.transport is not None
            probe.transport.close()

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return results["direct"], results["proxy"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux /proc; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(
    title: str, direct: list[float], proxy: list[float], cpu_us: float | None = None
) -> None:
    """One row; `cpu_us`: the proxy's CPU per relayed request, which unlike latency does
    not move with the VM's load (warm-up requests included)."""
    d50, d99, p50, p99 = pct(direct, 50), pct(direct, 99), pct(proxy, 50), pct(proxy, 99)
    cpu = f"  proxy CPU {cpu_us:5.0f} us/req" if cpu_us is not None else ""
    print(
        f"{title:<36} n={len(proxy):>4}  direct p50 {d50:7.2f} p99 {d99:7.2f}  "
        f"proxy p50 {p50:7.2f} p99 {p99:7.2f}  added p50 {p50 - d50:+6.2f} ms "
        f"p99 {p99 - d99:+6.2f} ms{cpu}"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per side per row")
    parser.add_argument("--rounds", type=int, default=3, help="times to measure the table")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.05,
        help="s the upstream takes to answer in the 50-concurrent rows (the real API takes "
        "far longer; with 0 s, 50 clients saturate the 2 cores and the row measures queueing)",
    )
    parser.add_argument("--stream-delay", type=float, default=0.005, help="s between SSE events")
    parser.add_argument("--policy-arm", default=None, help="also bench with this arm applied")
    parser.add_argument(
        "--workers", type=int, default=1, help="run the benched proxies with --workers N"
    )
    parser.add_argument(
        "--capture", action="store_true", help="also bench capture on (100 %%) vs off"
    )
    parser.add_argument(
        "--capture-only", action="store_true", help="only the capture on vs off rows"
    )
    parser.add_argument(
        "--upstream",
        choices=("canned", "fake"),
        default="canned",
        help="canned: a fixed answer at ~no CPU (isolates the proxy); fake: the loopback "
        "Anthropic server (tokenlens.testing), realistic but CPU-hungry",
    )
    args = parser.parse_args()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print(
        f"bench_proxy: {os.cpu_count()} CPUs, load average {load:.1f}; client, proxy and "
        f"{args.upstream} upstream share them; proxy workers: {args.workers}\n"
    )
    upstream, upstream_url = start_upstream(args.upstream, args.stream_delay)
    slow, slow_url = start_upstream("canned", args.stream_delay, args.latency)
    processes: list[subprocess.Popen[Any]] = [upstream, slow]
    try:
        if args.capture_only:
            bench_capture(upstream_url, args, processes)
            return
        startups = []
        for _ in range(3):
            process, _, seconds = start_proxy(upstream_url, [])
            startups.append(seconds)
            process.terminate()
            process.wait()
        print(
            f"start-up (command to first answered request): median "
            f"{statistics.median(startups):.2f} s over 3 starts {[round(s, 2) for s in startups]}\n"
        )
        workers = ["--workers", str(args.workers)] if args.workers > 1 else []
        proxy, proxy_url, _ = start_proxy(upstream_url, workers)
        slow_proxy, slow_proxy_url, _ = start_proxy(slow_url, workers)
        if workers:
            time.sleep(3)  # the first worker answered; let the others finish starting
        processes += [proxy, slow_proxy]
        instant = (upstream_url, proxy_url)
        waiting = (slow_url, slow_proxy_url)
        late = f"{args.latency * 1000:.0f} ms upstream"
        rows = [
            ("pass-through, 1 concurrent", 1, False, args.requests, instant),
            (f"pass-through, 50 conc., {late}", 50, False, args.requests, waiting),
            ("pass-through, 50 conc., 0 ms upstream", 50, False, args.requests, instant),
            ("stream TTFB, 1 concurrent", 1, True, args.requests // 2, instant),
            (f"stream TTFB, 50 conc., {late}", 50, True, args.requests // 2, waiting),
        ]
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_} (probe client)")
            for title, concurrency, first_byte, requests, (direct_url, via_url) in rows:
                pid = (proxy if via_url == proxy_url else slow_proxy).pid
                cpu_before = cpu_seconds(pid)
                direct, via = asyncio.run(
                    alternate(
                        direct_url,
                        via_url,
                        requests=requests,
                        concurrency=concurrency,
                        first_byte=first_byte,
                        stagger_s=args.latency if direct_url == slow_url else 0.0,
                    )
                )
                relayed = len(via) + 20 * concurrency  # the warm-up requests too
                cpu_us = (cpu_seconds(pid) - cpu_before) / relayed * 1e6
                report(title, direct, via, cpu_us)
            direct, via = asyncio.run(
                alternate_httpx(upstream_url, proxy_url, requests=args.requests // 4)
            )
            report("pass-through, 1 conc., httpx client", direct, via)
            print()
        if args.policy_arm:
            with tempfile.TemporaryDirectory() as folder:
                policy = write_policy(args.policy_arm, Path(folder))
                compressing, url, _ = start_proxy(upstream_url, ["--policy", str(policy)])
                processes.append(compressing)
                direct, via = asyncio.run(
                    alternate(
                        upstream_url, url, requests=args.requests, concurrency=1, first_byte=False
                    )
                )
                report(f"policy {args.policy_arm}, 1 concurrent", direct, via)
                feed = httpx.get(f"{url}/tokenlens/feed.json").json()
                timing = feed["compress_ms"]
                print(
                    f"  compress_request inside the proxy: p50 {timing['p50']:.2f} ms, "
                    f"p99 {timing['p99']:.2f} ms; reduction {feed['savings']['reduction']:.1%} "
                    f"(the upstream also reads a shorter prompt)"
                )
        if args.capture:
            bench_capture(upstream_url, args, processes)
    finally:
        for process in processes:
            process.terminate()
            process.wait()


def bench_capture(upstream_url: str, args: argparse.Namespace, processes: list[Any]) -> None:
    """Capture on (every Messages request, redacted, written) against capture off."""
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "captures"
        off, off_url, _ = start_proxy(upstream_url, [])
        on, on_url, _ = start_proxy(
            upstream_url, ["--capture", str(store), "--capture-sample", "1"]
        )
        processes += [off, on]
        for round_ in range(1, args.rounds + 1):
            print(f"capture round {round_}: capture off vs on (100 % sampled), 1 concurrent")
            for title, first_byte, requests in (
                ("plain", False, args.requests),
                ("stream TTFB", True, args.requests // 2),
            ):
                cpu_off, cpu_on = cpu_seconds(off.pid), cpu_seconds(on.pid)
                via_off, via_on = asyncio.run(
                    alternate(
                        off_url, on_url, requests=requests, concurrency=1, first_byte=first_byte
                    )
                )
                relayed = len(via_on) + 20
                cpu_off = (cpu_seconds(off.pid) - cpu_off) / relayed * 1e6
                cpu_on = (cpu_seconds(on.pid) - cpu_on) / relayed * 1e6
                o50, o99, n50, n99 = (
                    pct(via_off, 50),
                    pct(via_off, 99),
                    pct(via_on, 50),
                    pct(via_on, 99),
                )
                print(
                    f"  {title:<12} n={len(via_on):>4}  off p50 {o50:6.2f} p99 {o99:6.2f}  "
                    f"on p50 {n50:6.2f} p99 {n99:6.2f}  added p50 {n50 - o50:+6.3f} ms "
                    f"p99 {n99 - o99:+6.2f} ms  proxy CPU off {cpu_off:4.0f} / on {cpu_on:4.0f} "
                    "us/req (incl. the writer thread)"
                )
            print()
        on.terminate()  # drains the writer: count what it wrote
        on.wait()
        lines = sum(part.read_text().count("\n") for part in store.glob("capture-*.jsonl"))
        print(f"capture store: {lines} records written (redacted, mode 0600)")


if __name__ == "__main__":
    main()

"""What the relay's issue-24 checks cost per request: the check at connection reuse and the
response-header check.

Reuse: one aiohttp session per connector, sequential keep-alive GETs to a loopback upstream
(a raw asyncio server answering a fixed 200, so the upstream costs ~nothing), plain
`aiohttp.TCPConnector` and the proxy's `ReuseCheckingConnector` alternating in blocks of 50
so both see the same machine load. Printed: each side's median round trip and their
difference (branch minus plain), per round. Headers: `relay.unsendable` on a typical
Messages answer's 14 headers, timed with timeit. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_upstream_checks.py [--requests 4000] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import timeit

import aiohttp

from tokenlens.proxy.relay import unsendable
from tokenlens.proxy.upstream import ReuseCheckingConnector

ANSWER = (
    b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'
)
HEADERS = [
    (b"date", b"Tue, 03 Nov 2026 10:00:00 GMT"),
    (b"content-type", b"application/json"),
    (b"content-length", b"412"),
    (b"connection", b"keep-alive"),
    (b"anthropic-ratelimit-requests-limit", b"4000"),
    (b"anthropic-ratelimit-requests-remaining", b"3999"),
    (b"anthropic-ratelimit-requests-reset", b"2026-11-03T10:00:01Z"),
    (b"anthropic-ratelimit-input-tokens-limit", b"400000"),
    (b"anthropic-ratelimit-input-tokens-remaining", b"399000"),
    (b"anthropic-ratelimit-output-tokens-limit", b"80000"),
    (b"request-id", b"req_011CQ3bKx5Fh3n8V1aGqgkRz"),
    (b"anthropic-organization-id", b"00000000-0000-0000-0000-000000000000"),
    (b"via", b"1.1 google"),
    (b"cf-cache-status", b"DYNAMIC"),
]


async def serve() -> tuple[asyncio.Server, str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(ANSWER)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/"


async def round_trip_ms(session: aiohttp.ClientSession, url: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def one_round(requests: int) -> tuple[float, float]:
    server, url = await serve()
    plain = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    checked = aiohttp.ClientSession(connector=ReuseCheckingConnector(limit=0))
    samples: dict[str, list[float]] = {"plain": [], "checked": []}
    try:
        for session in (plain, checked):  # warm up: open the pooled connection
            await round_trip_ms(session, url, 50)
        for _ in range(requests // 50):
            samples["plain"] += await round_trip_ms(plain, url, 50)
            samples["checked"] += await round_trip_ms(checked, url, 50)
    finally:
        await plain.close()
        await checked.close()
        server.close()
    return statistics.median(samples["plain"]), statistics.median(samples["checked"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000, help="requests per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rounds = 100, 1
    print(f"bench_upstream_checks: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    try:
        import uvloop

        uvloop.install()  # the proxy runs on uvloop (uvicorn picks it when installed)
        loop_name = "uvloop"
    except ImportError:
        loop_name = "asyncio"
    print(f"reuse check ({loop_name}, {args.requests} sequential keep-alive GETs per side):")
    for round_ in range(1, args.rounds + 1):
        plain, checked = asyncio.run(one_round(args.requests))
        print(
            f"  round {round_}: p50 plain {plain * 1000:.1f} us, with the check "
            f"{checked * 1000:.1f} us, added {(checked - plain) * 1000:+.1f} us "
            f"(ratio {checked / plain:.3f})"
        )
    runs = 2_000 if args.quick else 200_000
    seconds = min(timeit.repeat(lambda: unsendable(HEADERS), number=runs, repeat=3))
    print(
        f"header check (relay.unsendable, {len(HEADERS)} headers): "
        f"{seconds / runs * 1e6:.2f} us per answer"
    )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""The dry run's exact counts: one count_tokens call at a time vs in parallel.

With a key, `tokenlens calibrate --dry-run` counts every cleartext and compressed body
exactly (~200 bodies for the starter set's default ladder on one class set). This times
`tokenlens.dryrun.count_exactly` over the same bodies against the loopback Anthropic
server with a fixed latency standing in for the network (default 0.25 s, a round trip to
the real API), once with concurrency 1 (what the dry run did) and once with the dry run's
bound, and prints both with the load average. Asserts nothing.

    .venv/bin/python bench/bench_dryrun_counts.py [--latency 0.25] [--bodies 200] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time

from tokenlens.config import CalibrationConfig
from tokenlens.dryrun import COUNT_CONCURRENCY, count_exactly
from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.testing import FakeAnthropic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--bodies", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    args = parser.parse_args()
    if args.quick:
        args.latency, args.bodies = 0.02, 20
    tasks = CalibrationConfig().selected_tasks()
    bodies = [
        tasks[i % len(tasks)].to_request(model="claude-haiku-4-5") for i in range(args.bodies)
    ]
    with FakeAnthropic(latency_s=args.latency) as server:
        client = AnthropicClient("claude-haiku-4-5", base_url=server.base_url, api_key="sk-ant-x")
        timings = {}
        for concurrency in (1, COUNT_CONCURRENCY):
            start = time.perf_counter()
            counts = count_exactly(client.count_tokens, bodies, concurrency=concurrency)
            timings[concurrency] = time.perf_counter() - start
            assert all(c is not None for c in counts)
    one, many = timings[1], timings[COUNT_CONCURRENCY]
    print(
        f"{args.bodies} count_tokens calls at {args.latency:g} s latency: one at a time "
        f"{one:.1f} s, {COUNT_CONCURRENCY} at a time {many:.1f} s ({one / many:.1f}x); "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()

"""Figures for model access: loopback round trips, recovery under faults, the local model.

Prints numbers; asserts nothing (timing goals live here, not in tests). Run:

    .venv/bin/python bench/bench_models.py [--calls 40] [--skip-local]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.base import CompletionRequest, Message
from tokenlens.models.retry import RetryPolicy, TruncatedOutputError
from tokenlens.testing import FakeAnthropic

CONTEXT = (
    "The Lisbon office opened in 2019 and has 40 staff. Invoice 4417 was paid by Alice on "
    "March 3 by bank transfer. The cafeteria serves lunch from noon. " * 8
)


def request(i: int, max_tokens: int = 200) -> CompletionRequest:
    return CompletionRequest(
        model="claude-haiku-4-5",
        messages=(
            Message(
                role="user",
                content=[
                    {"type": "text", "text": CONTEXT},
                    {"type": "text", "text": f"Who paid invoice 4417? (variant {i})"},
                ],
            ),
        ),
        max_tokens=max_tokens,
        seed=i,
    )


def bench_loopback(calls: int) -> None:
    retry = RetryPolicy(max_attempts=6, initial_wait_s=0.05, max_wait_s=0.5, jitter_s=0.05)
    with FakeAnthropic(seed=3) as server:
        client = AnthropicClient(api_key="bench", base_url=server.base_url, retry=retry)
        for latency in (0.0, 0.2):
            server.configure(latency_s=latency)
            client.complete(request(-1))
            times = []
            for i in range(calls if latency == 0 else max(5, calls // 4)):
                started = time.perf_counter()
                client.complete(request(i))
                times.append(time.perf_counter() - started)
            print(
                f"loopback latency_s={latency:.1f}: {len(times)} calls, median "
                f"{statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
            )
        server.configure(latency_s=0.0)
        server.reset()
        server.set_fault_rate(0.2, seed=11)
        started = time.perf_counter()
        done = 0
        for i in range(calls):
            client.complete(request(i))
            done += 1
        wall = time.perf_counter() - started
        statuses = [r.status for r in server.calls()]
        failed = sum(1 for s in statuses if s != 200)
        print(
            f"20% injected 429/529/500: {done}/{calls} calls succeeded, {failed} faults "
            f"absorbed ({len(statuses) / calls:.2f} attempts per call), {wall:.1f} s wall"
        )
        client.close()


def bench_local() -> None:
    from tokenlens.models.local import LocalClient, _load

    client = LocalClient()
    started = time.perf_counter()
    _load(client.model_path, client.n_ctx, client.n_threads)
    print(f"local model {client.model}: load {time.perf_counter() - started:.2f} s")
    for i in range(3):
        req = request(i, max_tokens=96).model_copy(update={"model": client.model})
        started = time.perf_counter()
        try:
            completion = client.complete(req)
        except TruncatedOutputError as exc:
            completion = exc.completion  # type: ignore[assignment]
        took = time.perf_counter() - started
        print(
            f"  call {i}: {completion.usage.input_tokens} in / {completion.usage.output_tokens}"
            f" out tokens in {took:.2f} s ({completion.usage.output_tokens / took:.1f} out tok/s"
            f" overall, threads={client.n_threads})"
        )
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS of this process: {rss_mb:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()
    bench_loopback(args.calls)
    if not args.skip_local:
        bench_local()


if __name__ == "__main__":
    main()

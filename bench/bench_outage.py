"""How fast an unreachable upstream stops a run: the circuit breaker against the retries.

Sends a run's worth of calls (`--calls`, `--concurrency` at a time, as the pay stage
does) through one `AnthropicClient` at a loopback port nobody listens on, with the
default retry policy and breaker, and stops at the first `UpstreamUnavailable`, as the
pay stage does. Prints the time to that stop and the attempts made, beside what the same
calls cost without a breaker: each spends its whole backoff (the policy's waits, summed)
before it fails, `concurrency` at a time.

    python bench/bench_outage.py              # the defaults (~30 s)
    python bench/bench_outage.py --quick      # short waits and window, for the test suite
"""

from __future__ import annotations

import argparse
import os
import socket
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from tokenlens.errors import ModelCallError, UpstreamUnavailable
from tokenlens.formatting import plural
from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.base import CompletionRequest, Message
from tokenlens.models.breaker import BreakerPolicy, CircuitBreaker
from tokenlens.models.retry import RetryPolicy


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def backoff_s(policy: RetryPolicy) -> float:
    """A call's expected waits before its last attempt fails (jitter at its mean)."""
    return sum(
        min(policy.initial_wait_s * 2**i, policy.max_wait_s) + policy.jitter_s / 2
        for i in range(policy.max_attempts - 1)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=414, help="calls the run would make")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="short waits and window")
    args = parser.parse_args()
    retry = RetryPolicy()
    breaker = BreakerPolicy()
    if args.quick:
        retry = RetryPolicy(initial_wait_s=0.05, max_wait_s=0.2, jitter_s=0.01)
        breaker = BreakerPolicy(window_s=0.5, min_failures=5)
    port = closed_port()
    client = AnthropicClient(
        api_key="sk-ant-bench-dummy",
        base_url=f"http://127.0.0.1:{port}",
        retry=retry,
        breaker=CircuitBreaker(breaker),
    )
    request = CompletionRequest(
        model="claude-haiku-4-5", messages=(Message(role="user", content="hi"),), max_tokens=8
    )
    import anthropic  # noqa: F401  (the client imports it at its first call: not timed)

    failed = 0
    stopped: UpstreamUnavailable | None = None
    started = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        pending: set[Future[object]] = set()
        sent = 0
        while stopped is None and (sent < args.calls or pending):
            while sent < args.calls and len(pending) < args.concurrency and stopped is None:
                pending.add(pool.submit(client.complete, request))
                sent += 1
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                exc = future.exception()
                if isinstance(exc, UpstreamUnavailable):
                    stopped = stopped or exc
                elif isinstance(exc, ModelCallError):
                    failed += 1
        wait(pending)  # calls in a backoff wake when the breaker opens
    elapsed = time.perf_counter() - started
    client.close()
    per_call = backoff_s(retry)
    without = per_call * args.calls / args.concurrency
    print(
        f"upstream http://127.0.0.1:{port} (closed), {args.calls} calls, "
        f"{args.concurrency} at a time"
    )
    print(f"retry policy: {retry.max_attempts} attempts, ~{per_call:.1f} s of backoff per call")
    if stopped is None:
        print(f"breaker never opened: {failed} calls failed in {elapsed:.2f} s")
    else:
        print(
            f"breaker open after {elapsed:.2f} s ({plural(failed, 'call')} had failed): "
            f"{stopped.cause}"
        )
        print(f"  {stopped}")
    print(f"without the breaker: ~{without:.0f} s ({without / 60:.1f} min) of backoff")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

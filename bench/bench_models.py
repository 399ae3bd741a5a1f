"""Figures for model access: loopback round trips, recovery under faults, the local model.

Prints numbers; asserts nothing (timing goals live here, not in tests). Run:

    .venv/bin/python bench/bench_models.py [--calls 40] [--skip-local] [--cache-seeds 3]
    .venv/bin/python bench/bench_models.py --only-prompt-cache   # the local prompt cache alone
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


def prompt_cache_request(seed: int) -> CompletionRequest:
    """A calibration-like prompt of 725 SmolLM2 tokens (system + context + question)."""
    return CompletionRequest(
        model="smollm2",
        system="Answer briefly, using only the context.",
        messages=(
            Message(
                role="user",
                content=[
                    {"type": "text", "text": CONTEXT * 2},
                    {"type": "text", "text": "When was invoice 4417 paid, and how?"},
                ],
            ),
        ),
        max_tokens=48,
        temperature=1.0,
        seed=seed,
    )


def bench_prompt_cache(seeds: int) -> None:
    """One prompt answered once per seed: the prompt cache on vs off (the calibration case).

    Per seed, interleaved so the load of a shared machine hits all three alike: a plain
    `create_chat_completion` on a reset context (what an uncached call cost before the
    cache went through public llama-cpp-python API), the client with its cache off (it
    still saves and reloads each evaluated prompt, so hit and miss sample alike), and the
    client with its cache on (one miss, then hits).
    """
    from tokenlens.models.local import LocalClient, _load, chat_messages

    cached, uncached = LocalClient(), LocalClient(prompt_cache_bytes=0)
    loaded = _load(cached.model_path, cached.n_ctx, cached.n_threads)
    totals = {"plain library call": 0.0, "client, cache off": 0.0, "client, cache on": 0.0}
    texts: dict[str, list[str]] = {name: [] for name in totals}
    prompt_tokens = 0
    for seed in range(1, seeds + 1):
        req = prompt_cache_request(seed)
        for name, client in (
            ("plain library call", None),
            ("client, cache off", uncached),
            ("client, cache on", cached),
        ):
            started = time.perf_counter()
            if client is None:
                with loaded.lock:
                    loaded.llm.reset()
                    result = loaded.llm.create_chat_completion(
                        messages=chat_messages(req),
                        max_tokens=req.max_tokens,
                        temperature=req.temperature,
                        seed=seed,
                    )
                text = result["choices"][0]["message"]["content"] or ""
                prompt_tokens = int(result["usage"]["prompt_tokens"])
            else:
                try:
                    text = client.complete(req).text
                except TruncatedOutputError as exc:
                    text = exc.completion.text  # type: ignore[union-attr]
            took = time.perf_counter() - started
            totals[name] += took
            texts[name].append(text)
            print(f"  seed {seed} {name}: {took:.2f} s", flush=True)
    print(f"prompt cache: one {prompt_tokens}-token prompt answered {seeds}x (seeds 1-{seeds})")
    for name, total in totals.items():
        print(f"  {name}: {total:.1f} s")
    on = totals["client, cache on"]
    print(
        f"  speed-up of the cache: {totals['client, cache off'] / on:.2f}x vs cache off, "
        f"{totals['plain library call'] / on:.2f}x vs the plain library call"
    )
    print(
        f"  cache on: {cached.cache_hits} hits / {cached.cache_misses} misses, "
        f"{loaded.cache.nbytes / 2**20:.0f} MB held for {len(loaded.cache)} prompt(s)"
    )
    same = texts["client, cache off"] == texts["client, cache on"]
    plain = sum(
        a == b for a, b in zip(texts["plain library call"], texts["client, cache on"], strict=True)
    )
    print(
        f"  same text per seed, cache on vs off: {'yes' if same else 'NO'}; "
        f"as the plain library call: {plain}/{seeds} seeds"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--cache-seeds", type=int, default=3)
    parser.add_argument("--only-prompt-cache", action="store_true")
    args = parser.parse_args()
    if not args.only_prompt_cache:
        bench_loopback(args.calls)
        if args.skip_local:
            return
        bench_local()
    bench_prompt_cache(args.cache_seeds)


if __name__ == "__main__":
    main()

"""Figures for the shared store: what the object-store ledger costs per call vs local disk.

Prints numbers; asserts nothing (timing goals live here, not in tests). S3 is moto's
standalone server on loopback, so network latency is ~0 and the figures are the client
and protocol overhead (s3fs/botocore, one HTTP round trip per operation); add your real
round-trip time per operation for a remote bucket. Run:

    .venv/bin/python bench/bench_scale.py [--calls 200] [--delay 0.05] [--threads 8]

Sections:
- per recorded call (one thread): a miss looked up again in the store + the durable put,
  i.e. what the ledger adds to every paid call; and a cache hit.
- opening a ledger of N records (uncompacted, then compacted) and compacting it.
- ledger-bound throughput of 1 vs 2 processes x `--threads` threads whose fake model call
  takes `--delay` s: a skeleton of the issue's 1-vs-2-workers speed-up, with the ledger as
  the only shared resource (the real flow fan-out replaces the fake client).
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tokenlens.ledger import Ledger, LedgerClient
from tokenlens.testing.ledger_workers import FakeClient, key_for, request_for
from tokenlens.testing.loopback_s3 import loopback_s3, new_bucket


def per_call_ms(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return f"p50 {statistics.median(ms):7.2f} ms  p95 {p95:7.2f} ms"


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def bench_per_call(root: str, calls: int) -> None:
    ledger = Ledger(root)
    fake = FakeClient("bench")
    misses, puts = [], []
    for i in range(calls):
        request = request_for(i)
        misses.append(timed(lambda i=i: ledger.get(key_for(i))))
        completion = fake.complete(request)
        puts.append(
            timed(
                lambda i=i, r=request, c=completion: ledger.put(
                    key_for(i), kind="answer", client=fake.name, request=r, completion=c
                )
            )
        )
    client = LedgerClient(fake, ledger)
    hits = [timed(lambda i=i: client.complete(request_for(i))) for i in range(calls)]
    total = [m + p for m, p in zip(misses, puts, strict=True)]
    print(f"  miss, looked up again in the store: {per_call_ms(misses)}")
    print(f"  durable put:                        {per_call_ms(puts)}")
    print(f"  = added to every paid call:         {per_call_ms(total)}")
    print(f"  cache hit (in memory):              {per_call_ms(hits)}")
    open_raw = timed(lambda: Ledger(root))
    compact = timed(lambda: Ledger(root).compact())
    open_compacted = timed(lambda: Ledger(root))
    print(
        f"  open {calls} records: {open_raw * 1000:7.1f} ms uncompacted, "
        f"{open_compacted * 1000:7.1f} ms compacted; compact: {compact * 1000:7.1f} ms"
    )


def _worker(root: str, indices: list[int], threads: int, delay: float) -> None:
    client = LedgerClient(FakeClient("w", delay), Ledger(root))
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: client.complete(request_for(i)), indices))


def bench_workers(root_for: Callable[[], str], calls: int, threads: int, delay: float) -> None:
    spawn = multiprocessing.get_context("spawn")
    walls = {}
    for workers in (1, 2):
        root = root_for()
        shards = [list(range(calls))[n::workers] for n in range(workers)]
        processes = [
            spawn.Process(target=_worker, args=(root, shard, threads, delay)) for shard in shards
        ]
        start = time.perf_counter()
        for process in processes:
            process.start()
        for process in processes:
            process.join()
        walls[workers] = time.perf_counter() - start
        ledger = Ledger(root)
        assert all(key_for(i) in ledger for i in range(calls))
        print(
            f"  {workers} process(es) x {threads} threads: {walls[workers]:6.2f} s wall "
            f"(incl. ~1-2 s process start), {calls / walls[workers]:6.1f} calls/s"
        )
    print(f"  speed-up 2 vs 1: {walls[1] / walls[2]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.05, help="fake model call, seconds")
    parser.add_argument("--threads", type=int, default=8, help="concurrent calls per process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, loopback_s3():
        counter = iter(range(1_000_000))

        def local_root() -> str:
            return str(Path(tmp) / f"ledger-{next(counter)}")

        def s3_root() -> str:
            return f"s3://{new_bucket()}/store/ledger"

        for name, root_for in (
            ("local disk (fsync'd journal)", local_root),
            ("S3 (moto, loopback)", s3_root),
        ):
            print(f"{name}, {args.calls} calls:")
            bench_per_call(root_for(), args.calls)
        for name, root_for in (("local disk", local_root), ("S3 (moto, loopback)", s3_root)):
            print(f"{name}, {args.calls} calls of {args.delay * 1000:.0f} ms each:")
            bench_workers(root_for, args.calls, args.threads, args.delay)


if __name__ == "__main__":
    main()

"""Figures for scale-out: the shared ledger's cost per call, and one calibration paid by
1 vs 2 Prefect workers.

Prints numbers; asserts nothing (timing goals live here, not in tests). S3 is moto's
standalone server on loopback, so network latency is ~0 and the figures are the client
and protocol overhead (s3fs/botocore, one HTTP round trip per operation); add your real
round-trip time per operation for a remote bucket. Run:

    .venv/bin/python bench/bench_scale.py [--latency 2] [--concurrency 4] [--repeats 3] [--quick]

Sections:
- per recorded call (one thread): a miss looked up again in the store + the durable put,
  i.e. what the ledger adds to every paid call; and a cache hit (`--calls`).
- opening a ledger of N records (uncompacted, then compacted) and compacting it.
- fan-out: a Prefect server, the loopback Anthropic server answering each call after
  `--latency` s, and `prefect worker start --type process` workers (one flow run at a
  time each). One calibration (12 tasks, metric judge) is paid by 1 worker (`shards=1`),
  then by 2 workers (`shards=2`), both with the store (tables, ledger, policy) in S3,
  then by 2 workers with a local store (the workers share this machine's disk). Each
  worker keeps `--concurrency` calls in flight, so the workload is worker-bound: the
  ideal paying time halves with a second worker. Printed: the whole
  run's wall time (parent stages, shard start-up, paying, aggregate, publish) and the
  paying phase alone (first to last call at the server), their speed-ups, and what the
  S3 store added against the local one.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
POOL = "tokenlens"


def prefect_cli(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run([PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def start_workers(count: int, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """`count` process workers (one flow run at a time each), online before returning."""
    from prefect.client.orchestration import get_client

    names = [f"bench-{secrets.token_hex(3)}" for _ in range(count)]
    workers = [
        subprocess.Popen(
            [
                PREFECT,
                "worker",
                "start",
                "--pool",
                POOL,
                "--type",
                "process",
                "--limit",
                "1",
                "--name",
                name,
            ],
            cwd=REPO,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in names
    ]
    with get_client(sync_client=True) as client:
        while True:
            online = {w.name for w in client.read_workers_for_work_pool(POOL)}
            if set(names) <= online:
                return workers
            time.sleep(0.5)


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker (its flow runs have ended)
        worker.wait()


def bench_fan_out(args: argparse.Namespace, tmp: Path) -> None:
    """One calibration paid by 1 worker (one shard) vs 2 workers (two shards)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    from flows.calibrate import calibrate, flow_parameters
    from tokenlens.config import CalibrationConfig
    from tokenlens.testing import FakeAnthropic

    with (
        prefect_test_harness(server_startup_timeout=180),
        FakeAnthropic(seed=5, latency_s=args.latency) as server,
    ):
        env = {
            **os.environ,
            "PREFECT_API_URL": str(PREFECT_API_URL.value()),
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            "PREFECT_WORKER_PREFETCH_SECONDS": "1",
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-bench-dummy",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        os.environ.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="sk-ant-bench")
        prefect_cli(["work-pool", "create", POOL, "--type", "process", "--overwrite"], env)
        prefect_cli(["--no-prompt", "deploy", "--all"], env)
        figures: dict[str, tuple[float, float, int]] = {}
        for label, workers, root in (
            ("1 worker,  S3 store   ", 1, f"s3://{new_bucket()}/nightly"),
            ("2 workers, S3 store   ", 2, f"s3://{new_bucket()}/nightly"),
            ("2 workers, local store", 2, str(tmp / f"nightly-{secrets.token_hex(3)}")),
        ):
            config = CalibrationConfig(
                backend="anthropic",
                model="claude-haiku-4-5",
                classes=("extraction", "numeric-reasoning", "summarization"),
                max_tasks_per_class=args.tasks_per_class,
                methods=("safe", "prune"),
                rates=(0.6,),
                repeats=args.repeats,
                judge="metric",
                concurrency=args.concurrency,
                max_tokens=256,
                store=f"{root}/store",
                reports=f"{root}/reports",
            )
            pool = start_workers(workers, env)
            server.reset()
            server.configure(latency_s=args.latency)
            try:
                start = time.perf_counter()
                result = calibrate(
                    **flow_parameters(config, shards=workers, fail_on_unresolved=False)
                )
                wall = time.perf_counter() - start
            finally:
                stop_workers(pool)
            calls = [r for r in server.calls() if r.status == 200]
            span = max(r.timestamp for r in calls) - min(r.timestamp for r in calls)
            span += args.latency  # the first call started one latency before it was logged
            figures[label] = (wall, span, len(calls))
            ideal = len(calls) * args.latency / (args.concurrency * workers)
            hosts = {(r.result.host, r.result.launcher_pid) for r in result.shards if r.result}
            print(
                f"  {label}: {wall:6.1f} s whole run, {span:6.1f} s paying "
                f"(ideal {ideal:5.1f} s), {len(calls)} calls, {len(hosts)} worker(s), "
                f"parent paid {result.new_calls}"
            )
        one, two, local = figures.values()
        print(f"  speed-up 2 vs 1 worker: {one[0] / two[0]:.2f}x whole run, "
              f"{one[1] / two[1]:.2f}x paying phase")  # fmt: skip
        per_call = (two[1] - local[1]) * args.concurrency * 2 / two[2]
        print(
            f"  S3 vs local store, 2 workers: {two[1] - local[1]:+.1f} s paying phase, "
            f"{per_call * 1000:+.0f} ms per call (each worker slot's share)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="ledger section: calls")
    parser.add_argument("--latency", type=float, default=2.0, help="model call, seconds")
    parser.add_argument("--concurrency", type=int, default=4, help="calls in flight per worker")
    parser.add_argument("--tasks-per-class", type=int, default=4, help="3 classes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-ledger", action="store_true", help="only the fan-out")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the ledger section with 10 calls, no fan-out (it starts a Prefect server)",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls = 10
    tmp = Path(tempfile.mkdtemp(prefix="tokenlens-bench-scale-"))
    os.environ.setdefault("PREFECT_HOME", str(tmp / "prefect"))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ["PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED"] = "false"
    os.environ["HF_HUB_OFFLINE"] = "1"
    with loopback_s3():
        counter = iter(range(1_000_000))

        def local_root() -> str:
            return str(tmp / f"ledger-{next(counter)}")

        def s3_root() -> str:
            return f"s3://{new_bucket()}/store/ledger"

        if not args.skip_ledger:
            for name, root_for in (
                ("local disk (fsync'd journal)", local_root),
                ("S3 (moto, loopback)", s3_root),
            ):
                print(f"{name}, {args.calls} calls:")
                bench_per_call(root_for(), args.calls)
        if args.quick:
            return
        print(
            f"one calibration ({args.tasks_per_class} tasks x 3 classes, {args.repeats} "
            f"repeats), calls of {args.latency:g} s, {args.concurrency} in flight per worker:"
        )
        bench_fan_out(args, tmp)


if __name__ == "__main__":
    main()

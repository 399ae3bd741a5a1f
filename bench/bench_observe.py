"""What the metrics and the access log add to each request: `Observer.finish` timed alone.

One relayed request ends in one `Observer.finish(observation)`: a handful of labelled
counter increments and histogram observations, plus (with `--access-log`) one JSON line
put on a queue. This times that call for a typical compressed request, in one process and
in prometheus_client's multiprocess mode (values in mmap'd files, as with `--workers N`),
with and without the access log, and the time to render one `/metrics` scrape. Prints
figures; asserts nothing.

    .venv/bin/python bench/bench_observe.py [--requests 20000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

CHILD = """
import os, statistics, sys, time
from tokenlens.proxy.accesslog import AccessLog
from tokenlens.proxy.metrics import ProxyMetrics
from tokenlens.proxy.observe import Observation, Observer

n, log_path = int(sys.argv[1]), sys.argv[2]
metrics = ProxyMetrics()
observer = Observer(metrics, AccessLog(log_path) if log_path != "off" else None)
classes = ["extraction", "summarization", "default"]
times = []
for i in range(n):
    obs = Observation("messages", "POST")
    obs.task_class, obs.decided_by, obs.arm = classes[i % 3], "rules", "prune@0.5"
    obs.model, obs.compress_ms, obs.upstream_ms = "claude-haiku-4-5", 3.2, 41.0
    obs.applied(1800, 950)
    start = time.perf_counter()
    observer.finish(obs, 200)
    times.append((time.perf_counter() - start) * 1e6)
times.sort()
start = time.perf_counter()
page = metrics.render()
render_ms = (time.perf_counter() - start) * 1000
if observer.access_log is not None:
    observer.access_log.close()
p99 = times[int(len(times) * 0.99)]
print(f"{statistics.median(times):.1f} {p99:.1f} {render_ms:.2f} {len(page)}")
"""


def run(requests: int, *, multiprocess: bool, access_log: bool) -> str:
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ)
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        if multiprocess:
            env["PROMETHEUS_MULTIPROC_DIR"] = folder
        log_path = os.path.join(folder, "access.jsonl") if access_log else "off"
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(requests), log_path],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    p50, p99, render_ms, size = out
    return f"p50 {p50} us, p99 {p99} us per request; /metrics render {render_ms} ms ({size} B)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    args = parser.parse_args()
    if args.quick:
        args.requests = 300
    print(f"bench_observe: {args.requests} observations per row, load {os.getloadavg()[0]:.1f}")
    started = time.perf_counter()
    for title, multiprocess, access_log in (
        ("one process, metrics only", False, False),
        ("one process, metrics + access log", False, True),
        ("multiprocess mode (--workers), metrics only", True, False),
        ("multiprocess mode (--workers), metrics + access log", True, True),
    ):
        figures = run(args.requests, multiprocess=multiprocess, access_log=access_log)
        print(f"  {title:52} {figures}")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()

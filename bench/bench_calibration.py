"""Bench: wall time of a calibration against the loopback server vs the ideal.

The server answers every call after a fixed latency (default 200 ms). With `concurrency`
workers the ideal wall time of the model calls is calls x latency / concurrency; what
the flow adds on top is compression, Prefect bookkeeping, Parquet and fsync'd ledger
writes. The second figure is a fully cached rerun (0 calls) in the same process, i.e. the
cost of "never pay twice" when nothing changed; the third is the same no-op rerun as a
user types it, `tokenlens calibrate ...` in a new process (start-up, imports and its
temporary Prefect server included).

Process start-up (the temporary Prefect server, started as the CLI starts it; the
Anthropic SDK's import, which happens at the first call) is not counted in the first two
figures; the third counts all of it.
Every figure moves with the load of a shared machine: the load average is printed.

The first figure is split by the server's own clock: start-up (flow start to the first
request), paying (first request to the last reply: answers and judge calls, which
overlap since there is no barrier between them), and the tail (last reply to the
flow's return: tables, aggregate, report, policy, artifacts).

Usage: .venv/bin/python bench/bench_calibration.py [--latency 0.2] [--concurrency 8] [--quick]
Prints figures; asserts nothing (timing goals are not tests). `--quick` (the test suite):
1 task per class, 1 repeat, 20 ms calls, no CLI rerun; with PREFECT_API_URL set it uses
that server instead of starting one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tasks-per-class", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--judge", choices=("metric", "llm", "both"), default="llm")
    parser.add_argument("--quick", action="store_true", help="seconds, not a measurement")
    args = parser.parse_args()
    if args.quick:
        args.latency, args.tasks_per_class, args.repeats = 0.02, 1, 1
    print(f"start: {load()}")

    root = Path(tempfile.mkdtemp(prefix="tokenlens-bench-"))
    os.environ.setdefault("PREFECT_HOME", str(root / "prefect"))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ["HF_HUB_OFFLINE"] = "1"

    from tokenlens.calibration.prefect_server import prefect_api

    # The server the CLI would use: the configured one, else a temporary one of ours,
    # with the settings `tokenlens calibrate` runs its flows with.
    started = time.perf_counter()
    with prefect_api():
        measure(args, root, started)


def measure(args: argparse.Namespace, root: Path, started: float) -> None:
    from prefect import flow

    from flows.calibrate import calibrate, flow_parameters
    from tokenlens.config import CalibrationConfig
    from tokenlens.testing import FakeAnthropic

    @flow(name="bench-warmup")
    def warmup() -> None:
        """Run one flow before timing anything (first-use costs of the client and server)."""

    warmup()
    import anthropic  # noqa: F401 - loaded at the first call: process start-up

    print(f"prefect and SDK start-up (not counted): {time.perf_counter() - started:.1f} s")

    with FakeAnthropic(seed=3, latency_s=args.latency) as server:
        os.environ["ANTHROPIC_BASE_URL"] = server.base_url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-bench-dummy"
        config = CalibrationConfig(
            backend="anthropic",
            model="claude-haiku-4-5",
            max_tasks_per_class=args.tasks_per_class,
            methods=("safe", "minify", "dedup", "prune", "select"),
            rates=(0.6,),
            repeats=args.repeats,
            judge=args.judge,
            concurrency=args.concurrency,
            max_tokens=1024,
            store=root / "store",
            reports=root / "reports",
        )
        params = flow_parameters(config, fail_on_unresolved=False)
        started, started_clock = time.perf_counter(), time.time()
        first = calibrate(**params)
        wall = time.perf_counter() - started
        ended_clock = time.time()
        made = server.calls()
        calls = len(made)
        ideal = calls * args.latency / args.concurrency
        first_request = min(r.timestamp for r in made) - args.latency
        last_reply = max(r.timestamp for r in made)
        answers = [r.timestamp for r in made if not r.is_judge]
        judged = [r.timestamp for r in made if r.is_judge]
        held = sorted(r.timestamp - r.received for r in made if r.received is not None)

        started = time.perf_counter()
        again = calibrate(**params)
        cached = time.perf_counter() - started
        rerun_calls = len(server.calls()) - calls

        if args.quick:
            report(args, wall, ideal, calls, first_request - started_clock)
            print(f"  paying         {last_reply - first_request:7.2f} s")
            print(f"  tail           {ended_clock - last_reply:7.2f} s")
            print(f"cached rerun:    {cached:7.2f} s, {rerun_calls} calls, {again.new_calls} new")
            print(f"end: {load()}")
            return
        cli = [
            sys.executable, "-m", "tokenlens", "calibrate", "--backend", "anthropic",
            "--model", "claude-haiku-4-5", "--max-tasks-per-class", str(args.tasks_per_class),
            "--methods", "safe,minify,dedup,prune,select", "--rates", "0.6",
            "--repeats", str(args.repeats), "--judge", args.judge,
            "--concurrency", str(args.concurrency), "--max-tokens", "1024",
            "--store", str(root / "store"), "--reports", str(root / "reports"),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        started = time.perf_counter()
        done = subprocess.run(cli, env=env, capture_output=True, text=True, check=False)
        cli_wall = time.perf_counter() - started
        cli_calls = len(server.calls()) - calls - rerun_calls
        spend = [line for line in done.stdout.splitlines() if line.startswith("spend:")]

    report(args, wall, ideal, calls, first_request - started_clock)
    print(
        f"  paying         {last_reply - first_request:7.2f} s  (first request to last reply; "
        f"ideal {ideal:.2f})"
    )
    if answers and judged:
        print(
            f"    answers {min(answers) - args.latency - first_request:5.2f} to "
            f"{max(answers) - first_request:5.2f} s, judge calls "
            f"{min(judged) - args.latency - first_request:5.2f} to "
            f"{max(judged) - first_request:5.2f} s"
        )
    if held:
        print(
            f"    the server held each call {1000 * held[len(held) // 2]:.1f} ms (median), "
            f"{1000 * held[-1]:.1f} ms at most (its answers are made during the latency)"
        )
    print(f"  tail           {ended_clock - last_reply:7.2f} s  (last reply to the flow's return)")
    print(f"cached rerun:    {cached:7.2f} s, {rerun_calls} calls, {again.new_calls} new")
    print(
        f"CLI no-op rerun: {cli_wall:7.2f} s wall (new process + temporary Prefect server), "
        f"{cli_calls} calls, exit {done.returncode}"
    )
    print(f"  {spend[0] if spend else done.stderr[-500:]}")
    print(f"policy: {first.policy_path}")
    print(f"end: {load()}")


def report(
    args: argparse.Namespace, wall: float, ideal: float, calls: int, start_up: float
) -> None:
    print(
        f"calibration: {calls} calls at {1000 * args.latency:.0f} ms latency, "
        f"concurrency {args.concurrency}"
    )
    print(f"  wall time      {wall:7.2f} s")
    print(f"  ideal          {ideal:7.2f} s  (calls x latency / concurrency)")
    print(f"  overhead       {wall - ideal:7.2f} s  ({wall / ideal:.2f}x ideal)")
    print(f"  start-up       {start_up:7.2f} s  (flow start to the first request)")


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()

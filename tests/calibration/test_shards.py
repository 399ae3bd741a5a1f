"""One calibration sharded over two real Prefect process workers (issue 16, fan-out).

Everything is real and on loopback: the session's Prefect server, moto's S3 server (the
store and reports, ledger included, live in a bucket), the loopback Anthropic server,
and two `prefect worker start --type process` workers (one flow run at a time each, so
each takes one shard). The parent flow runs in the test process against the same
Prefect API.

What must hold: the shards ran on both workers; every answer cell was paid exactly once
(the server's request log against the distinct call keys) and the parent paid nothing;
the ledger, tables and policy are in the bucket; the per-model global limit held across
both workers. Then with one worker SIGKILLed mid-shard (with its shard: a lost machine):
the parent marks the silent shard Crashed and resubmits it, the surviving worker runs it,
the run completes, and no call the ledger had recorded is paid again (only the killed
shard's calls in flight at the kill, at most its `concurrency`). Then `tokenlens
calibrate --shards 2` from the command line, cancelled mid-way: its shards are cancelled
and their processes stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import s3fs
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterTags,
)

from flows.calibrate import calibrate, flow_parameters
from tokenlens.calibration.call_limits import existing_limits, limit_name
from tokenlens.calibration.fanout import _last_heartbeat
from tokenlens.calibration.result import CalibrationResult
from tokenlens.calibration.runs import list_runs
from tokenlens.ledger import Ledger
from tokenlens.storage import location, read_parquet
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.loopback_s3 import loopback_s3, new_bucket
from tokenlens.testing.workers import (
    deploy,
    descendants,
    flow_run_processes,
    kill_tree,
    start_worker,
    wait_for,
    worker_env,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

LATENCY = 0.25  # seconds per model call: calls overlap, so the limits matter


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with loopback_s3() as endpoint:
        yield endpoint


@pytest.fixture
def workers(
    prefect_api: str, s3_endpoint: str, anthropic: FakeAnthropic
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The shard deployment on the pool and two process workers, each in its own session
    (so killing one kills its flow runs too)."""
    env = worker_env(prefect_api, PREFECT_FLOWS_HEARTBEAT_FREQUENCY="30")
    deploy(env)
    started = [start_worker(f"shard-worker-{n}", env) for n in (1, 2)]
    try:
        yield started
    finally:
        for worker in started:
            kill_tree(worker)


def flow_run_id_of(pid: int) -> str | None:
    """The flow run a worker's flow-run process runs (its PREFECT__FLOW_RUN_ID)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for entry in environ:
        if entry.startswith(b"PREFECT__FLOW_RUN_ID="):
            return entry.split(b"=", 1)[1].decode()
    return None


def sharded(config: Any, **options: Any) -> CalibrationResult:
    params = flow_parameters(config, shards=2, fail_on_unresolved=False)
    result: CalibrationResult = calibrate(**{**params, **options})
    return result


def in_bucket(make_config: Any, **overrides: Any) -> Any:
    """A small config whose store and reports are in a fresh bucket."""
    root = f"s3://{new_bucket()}/nightly"
    return make_config(store=f"{root}/store", reports=f"{root}/reports", **overrides)


def objects(root: str) -> set[str]:
    """Every object under an s3:// prefix, relative to it."""
    fs: Any = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    prefix = root.removeprefix("s3://")
    return {str(p)[len(prefix) + 1 :] for p in fs.find(prefix)}


def answer_calls(server: FakeAnthropic) -> list[Any]:
    return [r for r in server.calls() if r.status == 200 and not r.is_judge]


def answer_keys(result: CalibrationResult) -> set[str]:
    rows = read_parquet(location(f"{result.store}/answers.parquet")).to_pylist()
    return {row["call_key"] for row in rows if row["call_key"]}


def most_in_flight(calls: list[Any]) -> int:
    """The most calls the server was answering at once (each ends at its timestamp)."""
    edges = sorted([(c.timestamp - LATENCY, 1) for c in calls] + [(c.timestamp, -1) for c in calls])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_one_calibration_sharded_over_two_workers(
    workers: list[subprocess.Popen[bytes]],
    anthropic: FakeAnthropic,
    make_config: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a stray local write would land here
    anthropic.configure(latency_s=LATENCY)
    config = in_bucket(make_config, repeats=1, concurrency=4)
    ledger = f"{config.store}/ledger"
    try:
        result = sharded(config, calls_limit=3)
    finally:  # the other tests run without a limit (a missing one must not hold anything up)
        with get_client(sync_client=True) as client:
            client.delete_global_concurrency_limit_by_name(limit_name(config.model))

    # Both workers ran a shard: the shard's launching process is a worker we started.
    shards = [run.result for run in result.shards if run.result is not None]
    assert len(shards) == len(result.shards) == 2, result.shards
    assert {s.launcher_pid for s in shards} == {w.pid for w in workers}
    assert sum(s.tasks for s in shards) == 4 and all(s.new_calls > 0 for s in shards)
    # Every answer cell was paid exactly once, by the shards; the parent found them all.
    keys = answer_keys(result)
    assert len(answer_calls(anthropic)) == len(keys) == sum(s.new_calls for s in shards)
    assert result.new_calls == 0
    # Everything is in the bucket: the ledger with every call, tables, policy, report.
    assert result.ledger.startswith(ledger)
    stored = Ledger(ledger)
    assert all(key in stored for key in keys)
    run_id = result.run_id
    in_store, in_reports = objects(config.store), objects(config.reports)
    for name in ("run.json", "tasks.parquet", "answers.parquet", "grades.parquet"):
        assert f"runs/{run_id}/{name}" in in_store, name
    assert {f"runs/{run_id}/policy.json", "policy/latest.json"} <= in_reports
    assert list(tmp_path.iterdir()) == []  # nothing written to the local disk
    # The per-model global limit held across both workers (each alone allows 4).
    assert 1 < most_in_flight(answer_calls(anthropic)) <= 3


def test_a_shard_lost_with_its_worker_is_resubmitted_and_pays_nothing_twice(
    workers: list[subprocess.Popen[bytes]], anthropic: FakeAnthropic, make_config: Any
) -> None:
    anthropic.configure(latency_s=LATENCY)
    # One call at a time: each shard has ~5 s of paying, so the younger one is mid-way at the kill.
    config = in_bucket(make_config, repeats=2, concurrency=1)
    ledger = f"{config.store}/ledger"
    assert not existing_limits([config.model])  # shards run unlimited, and do not wait
    killed: dict[str, Any] = {}

    first_seen: dict[int, float] = {}

    def youngest_live_shard(busy: list[subprocess.Popen[bytes]]) -> Any:
        """The busy worker whose shard started last (the most work left, so it cannot
        finish in the moment before the kill), once that shard has run a second and the
        server has its heartbeat (a shard killed before its first heartbeat is waited for,
        never judged lost: fanout.py); or None."""
        now = time.monotonic()
        shard_of = {}
        for worker in busy:
            for pid in flow_run_processes(worker.pid):
                first_seen.setdefault(pid, now)
                shard_of[worker.pid] = pid
        if len(shard_of) < 2:
            return None
        worker_pid, pid = max(shard_of.items(), key=lambda item: first_seen[item[1]])
        run_id = flow_run_id_of(pid)
        if now - first_seen[pid] < 1.0 or run_id is None:
            return None
        with get_client(sync_client=True) as client:
            if _last_heartbeat(client, UUID(run_id)) is None:
                return None
        return next(w for w in busy if w.pid == worker_pid)

    def kill_a_worker_mid_shard() -> None:
        """Once both shards run and calls were made, SIGKILL the worker of the younger
        shard, and the shard with it."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            busy = [w for w in workers if flow_run_processes(w.pid)]
            victim = None
            if len(busy) == 2 and len(answer_calls(anthropic)) >= 8:
                victim = youngest_live_shard(busy)
            if victim is not None:
                tree = [victim.pid, *descendants(victim.pid)]
                for pid in tree:
                    os.kill(pid, signal.SIGKILL)
                killed["worker"] = victim.pid
                killed["ledger"] = {r.key for r in Ledger(ledger).records()}
                killed["paid"] = len(answer_calls(anthropic))
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_a_worker_mid_shard, daemon=True)
    killer.start()
    result = sharded(config, shard_lost_after=45.0)  # one call: the lost shard comes back
    killer.join(timeout=5)
    assert "worker" in killed, "no worker was killed"

    survivor = next(w.pid for w in workers if w.pid != killed["worker"])
    finished_on = {run.result.launcher_pid for run in result.shards if run.result}
    assert finished_on == {survivor}, finished_on  # it finished both shards
    with get_client(sync_client=True) as client:
        run_counts = sorted(client.read_flow_run(r.flow_run_id).run_count for r in result.shards)  # type: ignore[arg-type]
    assert run_counts == [1, 2]  # the lost shard's flow run ran a second time
    keys = answer_keys(result)
    paid = len(answer_calls(anthropic))
    assert set(keys) <= {r.key for r in Ledger(ledger).records()}
    # Nothing recorded before the kill was paid again: the only extra calls are those
    # the killed shard had in flight (paid, never recorded), at most its concurrency.
    extra = paid - len(keys)
    assert 0 <= extra <= config.concurrency, (paid, len(keys))
    assert killed["ledger"] and killed["paid"] >= 8
    # The run's spend adds up over both shards and the lost one's two attempts.
    assert result.run_calls == len({r.key for r in Ledger(ledger).records()})


def test_cancelling_a_sharded_cli_run_cancels_its_shards(
    workers: list[subprocess.Popen[bytes]],
    anthropic: FakeAnthropic,
    make_config: Any,
    prefect_api: str,
    tmp_path: Path,
) -> None:
    """`tokenlens calibrate --shards 2` against the pool's server; `prefect flow-run
    cancel` on it while its shards run: both shards end Cancelled, their processes gone,
    and no more calls are made.

    Once the first shard has paid, each shard's next call is held (one call at a time
    each, so a held call holds its shard): however late the other shard's process starts
    on a loaded machine, neither can finish before the cancel."""
    anthropic.configure(latency_s=0.25, stall_s=240.0)
    config = make_config(repeats=2, concurrency=1)
    cli = [
        sys.executable, "-m", "tokenlens", "calibrate", "--shards", "2",
        "--backend", "anthropic", "--model", str(config.model),
        "--classes", ",".join(config.classes), "--max-tasks-per-class", "2",
        "--methods", ",".join(config.methods), "--rates", "0.6", "--repeats", "2",
        "--judge", "metric", "--concurrency", "1",
        "--store", str(config.store), "--reports", str(config.reports),
    ]  # fmt: skip
    env = worker_env(prefect_api)
    with open(tmp_path / "cli.log", "wb") as log:
        parent = subprocess.Popen(cli, env=env, stdout=log, stderr=subprocess.STDOUT)

    def seen(what: str) -> Callable[[], str]:
        return lambda: f"{what}; {_shard_states(2)}; CLI:\n{_tail(tmp_path / 'cli.log')}"

    def cli_running() -> None:
        assert parent.poll() is None, f"the CLI exited first:\n{_tail(tmp_path / 'cli.log')}"

    try:
        wait_for(lambda: cli_running() or answer_calls(anthropic), 240, seen("a shard to pay"))
        anthropic.inject("stall", times=2)
        wait_for(lambda: cli_running() or anthropic.held() == 2, 240, seen("both shards held"))
        shards = wait_for(lambda: _running_shards(2), 30, seen("both shards Running"))
        [run] = list_runs(config.store)
        assert run.flow_run_id is not None
        done = subprocess.run(
            [str(Path(sys.executable).with_name("prefect")), "flow-run", "cancel", run.flow_run_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        code = parent.wait(timeout=120)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    output = (tmp_path / "cli.log").read_text()
    assert code == 130 and "cancelled" in output, output[-2000:]
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(run.flow_run_id).state  # type: ignore[arg-type]
    assert state is not None and state.is_cancelled(), state
    states = wait_for(lambda: _final_states(shards), 120, "the shards to be cancelled")
    assert set(states) == {"CANCELLED"}, states
    assert not [w for w in workers if flow_run_processes(w.pid)]  # their processes stopped
    paid = len(answer_calls(anthropic))
    time.sleep(3)
    assert len(answer_calls(anthropic)) == paid  # nothing is paid any more
    assert paid < 2 * 2 * 2 * 5, "the shards ran to the end"


def _newest_shards(count: int) -> list[Any]:
    """The newest `count` shard flow runs."""
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["calibration-shard"])),
            sort=FlowRunSort.EXPECTED_START_TIME_DESC,
            limit=count,
        )


def _running_shards(count: int) -> list[Any]:
    """The newest `count` shard flow runs' ids, once all of them are Running."""
    runs = _newest_shards(count)
    running = [r for r in runs if r.state is not None and r.state.is_running()]
    return [r.id for r in runs] if len(running) == count else []


def _shard_states(count: int) -> list[str]:
    """The newest `count` shard flow runs' states, for a failure's message."""
    return [f"{r.name}: {r.state.name if r.state else None}" for r in _newest_shards(count)]


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def _final_states(ids: list[Any]) -> list[str]:
    with get_client(sync_client=True) as client:
        states = [client.read_flow_run(run_id).state for run_id in ids]
    if all(state is not None and state.is_final() for state in states):
        return [state.type.value for state in states if state is not None]
    return []

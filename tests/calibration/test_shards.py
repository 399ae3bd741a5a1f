"""One calibration sharded over two real Prefect process workers (issue 16, fan-out).

Everything is real and on loopback: the session's Prefect server, moto's S3 server (the
store and reports, ledger included, live in a bucket), the loopback Anthropic server,
and two `prefect worker start --type process` workers (one flow run at a time each, so
each takes one shard). The parent flow runs in the test process against the same
Prefect API.

What must hold: the shards ran on both workers; every answer cell was paid exactly once
(the server's request log against the distinct call keys) and the parent paid nothing;
the ledger, tables and policy are in the bucket; the per-model global limit held across
both workers. Then with one worker SIGKILLed mid-shard: the run fails naming the lost
shard, a rerun completes on the surviving worker, and no call the ledger had recorded is
paid again (only the killed shard's calls in flight at the kill, at most its
`concurrency`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs
from prefect.client.orchestration import get_client

from flows.calibrate import calibrate, flow_parameters
from tokenlens.calibration.fanout import existing_limits, limit_name
from tokenlens.calibration.result import CalibrationResult
from tokenlens.calibration.shards import ShardError
from tokenlens.ledger import Ledger
from tokenlens.storage import location, read_parquet
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.loopback_s3 import loopback_s3, new_bucket

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
POOL = "tokenlens"
LATENCY = 0.25  # seconds per model call: calls overlap, so the limits matter


def prefect_cli(args: list[str], env: dict[str, str], timeout: float = 240) -> None:
    done = subprocess.run(
        [PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


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
    env = {
        **os.environ,
        "PREFECT_API_URL": prefect_api,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30",  # the minimum: a lost worker shows sooner
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    prefect_cli(["work-pool", "create", POOL, "--type", "process", "--overwrite"], env)
    prefect_cli(["--no-prompt", "deploy", "--all"], env)
    started = [start_worker(f"shard-worker-{n}", env) for n in (1, 2)]
    try:
        yield started
    finally:
        for worker in started:
            for pid in [*_descendants(worker.pid), worker.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            worker.wait(timeout=30)


def start_worker(name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`prefect worker start` taking one flow run at a time."""
    command = ["worker", "start", "--pool", POOL, "--type", "process", "--limit", "1"]
    return subprocess.Popen(
        [PREFECT, *command, "--name", name],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


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


def test_a_worker_killed_mid_shard_then_a_rerun_pays_nothing_twice(
    workers: list[subprocess.Popen[bytes]], anthropic: FakeAnthropic, make_config: Any
) -> None:
    anthropic.configure(latency_s=LATENCY)
    config = in_bucket(make_config, repeats=2, concurrency=2)
    ledger = f"{config.store}/ledger"
    assert not existing_limits([config.model])  # shards run unlimited, and do not wait
    killed: dict[str, Any] = {}

    def kill_a_worker_mid_shard() -> None:
        """Once both shards run and calls were made, SIGKILL one worker and its shard."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            busy = [w for w in workers if _flow_runs(w.pid)]
            if len(busy) == 2 and len(answer_calls(anthropic)) >= 8:
                victim = busy[0]
                tree = [victim.pid, *_descendants(victim.pid)]
                killed["tree"] = {pid: _cmdline(pid) for pid in tree}
                for pid in tree:
                    os.kill(pid, signal.SIGKILL)
                killed["worker"] = victim.pid
                killed["ledger"] = {r.key for r in Ledger(ledger).records()}
                killed["paid"] = len(answer_calls(anthropic))
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_a_worker_mid_shard, daemon=True)
    killer.start()
    with pytest.raises(ShardError, match=r"shard \d/2 .*CRASHED.*no heartbeat"):
        sharded(config, shard_lost_after=45.0)
    killer.join(timeout=5)
    assert "worker" in killed, "no worker was killed"

    result = sharded(config, shard_lost_after=45.0)  # the survivor runs both
    survivor = next(w.pid for w in workers if w.pid != killed["worker"])
    assert {run.result.launcher_pid for run in result.shards if run.result} == {survivor}
    assert result.new_calls == 0
    keys = answer_keys(result)
    paid = len(answer_calls(anthropic))
    assert set(keys) <= {r.key for r in Ledger(ledger).records()}
    # Nothing recorded before the kill was paid again: the only extra calls are those
    # the killed shard had in flight (paid, never recorded), at most its concurrency.
    extra = paid - len(keys)
    assert 0 <= extra <= config.concurrency, (paid, len(keys))
    assert killed["ledger"] and killed["paid"] >= 8


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _descendants(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        found += [child, *_descendants(child)]
    return found


def _flow_runs(worker: int) -> list[int]:
    """The worker's flow-run processes (they run `prefect.engine`)."""
    return [pid for pid in _descendants(worker) if "prefect.engine" in _cmdline(pid)]

"""The sequential design in the flow, against the loopback server's request log.

The ladder (extraction, 20 tasks, 90 % tolerance, so a ? needs 10 tasks) on the loopback
model at temperature 0.1: `safe` is lossless, `prune@0.8` borderline (it reads ~85 % with a
wide bound), and the aggressive arms after it (`prune@0.2`, `select@0.2`) are harmful.

The killed run is the same calibration as the run that resumes it (`_cli_args`): the task
pool sets the looks and their error levels, so a victim on another pool asks for cells
the resumed calibration never uses, which reads as paying twice when nothing was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flows.calibrate import calibrate, flow_parameters
from tokenlens.calibration.runs import list_runs
from tokenlens.config import CalibrationConfig
from tokenlens.ledger import Ledger
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.fake_anthropic import RecordedRequest

pytestmark = pytest.mark.slow

SEQUENTIAL: dict[str, Any] = {
    "classes": ("extraction",),
    # the 20 written extraction tasks (the first 20 of the class): a fixed sample, so the
    # test neither grows nor slows as the rest of the starter set changes
    "max_tasks_per_class": 20,
    "methods": ("safe", "prune", "select"),
    "rates": (0.8, 0.2),
    "repeats": 3,
    "temperature": 0.1,
    "tolerance": 0.90,
    "design": "sequential",
    # One call at a time: the loopback model tells identical requests apart only by the
    # order they arrive in (the API has no seed), so both runs must ask in the same order.
    "concurrency": 1,
}


def _answers(run_dir: Path) -> list[dict[str, Any]]:
    return pq.read_table(run_dir / "answers.parquet").to_pylist()


def _paid_answers(server: FakeAnthropic) -> int:
    return sum(1 for r in server.calls() if r.status == 200 and not r.is_judge)


def _requests(server: FakeAnthropic) -> list[RecordedRequest]:
    """The answer requests the server received, answered or not (there is no judge call)."""
    return [r for r in server.calls() if not r.is_judge]


def _keys(ledger: Path) -> set[str]:
    """The distinct calls the ledger holds (answered and stored)."""
    return {record.key for record in Ledger(ledger).records()}


def _cli_args(config: CalibrationConfig) -> list[str]:
    """`config` on the command line, so the killed run is the calibration that the run in
    process resumes (the task cap too: without it the victim took the class's 60 tasks)."""
    return [
        "--backend", config.backend, "--model", str(config.model),
        "--classes", ",".join(config.classes or ()),
        "--max-tasks-per-class", str(config.max_tasks_per_class),
        "--methods", ",".join(config.methods), "--rates", ",".join(map(str, config.rates)),
        "--repeats", str(config.repeats), "--tolerance", str(config.tolerance),
        "--judge", config.judge, "--design", config.design,
        "--temperature", str(config.temperature), "--concurrency", str(config.concurrency),
        "--max-tokens", str(config.max_tokens),
        "--store", str(config.store), "--reports", str(config.reports),
    ]  # fmt: skip


def _classes(policy_path: str) -> dict[str, Any]:
    """The per-class decisions, without when they were published (`certified_at` and
    `expires_at` date each run's entries)."""
    classes = json.loads(Path(policy_path).read_text())["classes"]
    for entry in classes.values():
        entry.pop("certified_at", None)
        entry.pop("expires_at", None)
    return dict(classes)


def test_clear_arms_stop_early_nothing_past_the_failure_then_a_killed_run_resumes(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any, tmp_path: Path
) -> None:
    config = make_config(**SEQUENTIAL)
    result = calibrate(**flow_parameters(config, fail_on_unresolved=False))
    answers = _answers(Path(result.store))
    # Every answer the server gave is one cell of the answers table: nothing else was paid.
    assert _paid_answers(anthropic) == len({a["call_key"] for a in answers if a["call_key"]})
    pairs = Counter(a["arm"] for a in answers if a["sample"] == 1)
    tasks = {arm: len({a["task_id"] for a in answers if a["arm"] == arm}) for arm in pairs}
    curve = {
        r["arm"]: r["status"]
        for r in pq.read_table(Path(result.store) / "curve.parquet").to_pylist()
        if r["task_class"] == "extraction"
    }
    assert curve["safe"] == "held" and curve["prune@0.8"] == "failed"
    assert pairs["safe"] < pairs["prune@0.8"]  # the clear arm stopped early ...
    # ... the borderline one got every task, and repeats until its bound fell below 90 %
    assert tasks["prune@0.8"] == 20 and pairs["prune@0.8"] >= 20 * 2
    assert tasks["prune@0.8"] > tasks.get("select@0.8", 0)
    assert pairs["prune@0.2"] == pairs["select@0.2"] == 0  # past the failure: never sampled
    fixed_pairs = 20 * 3 * 5
    assert sum(n for arm, n in pairs.items() if arm != "control") < 0.6 * fixed_pairs

    # The same calibration in a fresh store, killed mid-round, then run again: no call is
    # paid twice and the policy is the uninterrupted run's.
    other = make_config(**SEQUENTIAL, store=tmp_path / "b" / "store", reports=tmp_path / "b")
    anthropic.reset()  # the server forgets what it saw: the same requests, the same answers
    cli = [sys.executable, "-m", "tokenlens", "calibrate", *_cli_args(other)]
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    anthropic.configure(latency_s=0.02, stall_s=120.0)
    log = (tmp_path / "victim.log").open("w")
    victim = subprocess.Popen(cli, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while _paid_answers(anthropic) < 30:  # inside the second round
            assert victim.poll() is None, (tmp_path / "victim.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the victim never got going"
            time.sleep(0.02)
        # Hold the next requests so nothing is answered-but-unrecorded at the kill (a kill
        # loses at most the calls in flight; here there are none to lose).
        anthropic.inject("stall", times=1)
        # one worker (--concurrency 1): once its request is held, everything it was
        # answered before is recorded, and nothing else is in flight
        while anthropic.held() < 1:
            assert victim.poll() is None, (tmp_path / "victim.log").read_text()[-2000:]
            assert time.monotonic() < deadline + 60, "the victim never blocked"
            time.sleep(0.02)
        assert victim.poll() is None, "the victim finished before it could be killed"
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
    finally:
        if victim.poll() is None:
            victim.kill()
        log.close()
    deadline = time.monotonic() + 30
    while sum(1 for r in anthropic.calls() if r.fault == "stall") < 1:
        assert time.monotonic() < deadline, "the held requests never ended"
        time.sleep(0.05)
    ledger = Path(other.store) / "ledger"
    [victim_run] = list_runs(other.store)
    stored = _keys(ledger)
    # The calls the victim sent and never stored: its intents left at the kill (the one
    # held request, as its worker was blocked on it).
    in_flight = [
        json.loads(p.read_bytes())["key"]
        for p in (ledger / "intents" / victim_run.run_id).glob("*.json")
    ]
    assert len(_requests(anthropic)) == len(stored) + len(in_flight) and len(in_flight) == 1
    victim_sent = len(_requests(anthropic))

    anthropic.configure(latency_s=0.0)
    again = calibrate(**flow_parameters(other, fail_on_unresolved=False))
    [_, rerun] = list_runs(other.store)
    # One calibration killed and run again (a different task pool would be another
    # schedule: its early looks may ask for cells this one never does).
    assert rerun.calibration_id == victim_run.calibration_id
    keys = _keys(ledger)
    sent_again = _requests(anthropic)[victim_sent:]
    assert all(r.status == 200 for r in sent_again)
    # Never paid twice: the rerun sent only calls it then stored as new (no stored answer
    # was requested again), and those include every call in flight at the kill ...
    assert len(sent_again) == len(keys - stored) and set(in_flight) <= keys - stored
    # ... so the upstream saw each call once, plus once more for each one in flight.
    assert len(_requests(anthropic)) == len(keys) + len(in_flight)
    # Together the two paid for exactly the uninterrupted run's calls, and decided alike.
    assert keys == {a["call_key"] for a in answers if a["call_key"]}
    assert {a["call_key"] for a in _answers(Path(again.store)) if a["call_key"]} == keys
    assert _classes(again.policy_path) == _classes(result.policy_path)

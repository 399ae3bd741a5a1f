"""A calibration killed with SIGKILL mid-run, then resumed, pays for no call twice.

Killed while sampling (metric judge), and while the LLM judge's calls are in flight
beside the last answers' (answers and judge calls are one stream: `stage_pay`).

The victim draws a fresh sample (as the nightly does), so only `--resume` — the run's own
seeds — can reuse what it paid; a plain rerun would draw the config's sample instead.

How the kill is made exact: once some answers are in, the next `concurrency` requests are
held by the server ("stall" fault) so every worker of the victim is blocked on a call
that will never be answered; nothing else is in flight. Then SIGKILL. The stalled calls
end as 504s when the connection drops. Total 200-answers across both runs must equal the
number of distinct calls the ledger holds (with the metric judge: of unique answer
cells): not one more.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.calibration.test_flow import read_artifact
from tokenlens.calibration.artifacts import KEY_SPEND
from tokenlens.calibration.cells import sample_seed
from tokenlens.calibration.runs import list_runs
from tokenlens.cli import main as cli_main
from tokenlens.ledger import Ledger
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


CONCURRENCY = 2


def ok_answers(server: FakeAnthropic) -> int:
    return sum(1 for r in server.calls() if r.status == 200)


def ok_judge_calls(server: FakeAnthropic) -> int:
    return sum(1 for r in server.calls() if r.status == 200 and r.is_judge)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("judge", ["metric", "llm"])
def test_sigkill_mid_run_then_resume_pays_each_call_once(
    judge: str,
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(repeats=3, concurrency=CONCURRENCY)
    anthropic.configure(latency_s=0.05, stall_s=120.0)
    cli = [
        sys.executable, "-m", "tokenlens", "calibrate",
        "--backend", "anthropic", "--model", "claude-haiku-4-5",
        "--classes", ",".join(config.classes),
        "--max-tasks-per-class", "2",
        "--methods", ",".join(config.methods),
        "--rates", "0.6", "--repeats", "3", "--judge", judge,
        "--concurrency", str(CONCURRENCY), "--max-tokens", str(config.max_tokens),
        "--store", str(config.store), "--reports", str(config.reports),
        "--fresh-sample",
    ]  # fmt: skip
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    log = (tmp_path / "victim.log").open("w")
    victim = subprocess.Popen(cli, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        if judge == "metric":
            wait_for(lambda: ok_answers(anthropic) >= 12, 180, "the victim to start sampling")
        else:
            wait_for(lambda: ok_judge_calls(anthropic) >= 4, 180, "the victim to start judging")
        anthropic.inject("stall", times=CONCURRENCY)
        # Every worker is stuck on a held request (seen as held, not guessed from a quiet spell).
        wait_for(lambda: anthropic.held() >= CONCURRENCY, 120, "the victim's workers to block")
        assert victim.poll() is None, "the victim finished before it could be killed"
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
        log.close()
    wait_for(
        lambda: sum(1 for r in anthropic.calls() if r.fault == "stall") == CONCURRENCY,
        30,
        "the held requests to end",
    )
    before_rerun = ok_answers(anthropic)
    journals = list((Path(config.store) / "ledger").glob("journal-*.jsonl"))
    assert journals, "the killed run left its journal behind"
    # Requests the upstream received from the victim whose answers it never stored.
    in_flight = len(anthropic.calls()) - len(Ledger(Path(config.store) / "ledger"))
    assert in_flight == CONCURRENCY

    [victim_run] = list_runs(config.store)
    assert victim_run.status == "running" and victim_run.fresh_sample  # no clean end

    anthropic.configure(latency_s=0.0)
    resume = ["calibrate", "--resume", "--store", str(config.store)]
    assert cli_main([*resume, "--reports", str(config.reports)]) in (0, 4)

    [resumed] = list_runs(config.store)  # the same run, not a new one
    assert (resumed.run_id, resumed.seed) == (victim_run.run_id, victim_run.seed)
    assert resumed.status == "finished"
    answers = pq.read_table(Path(config.store) / "runs" / resumed.run_id / "answers.parquet")
    rows = answers.to_pylist()
    unique_cells = {a["call_key"] for a in rows}
    assert len(rows) == 4 * 3 * 5 and not [a for a in rows if a["error"]]
    assert {a["seed"] for a in rows} <= {
        sample_seed(victim_run.seed, r, s) for r in range(3) for s in (0, 1)
    }
    calls = len(Ledger(Path(config.store) / "ledger"))  # distinct calls, compacted
    assert ok_answers(anthropic) == calls  # not one more
    if judge == "metric":
        assert calls == len(unique_cells)
    else:
        assert ok_judge_calls(anthropic) == calls - len(unique_cells) > 0
    paid_now = calls - before_rerun
    out = capsys.readouterr().out
    assert paid_now > 0 and f"({paid_now} new calls this run)" in out
    assert f"in flight at a kill: {in_flight} calls sent with no answer stored" in out
    assert not list((Path(config.store) / "ledger").glob("journal-*.jsonl"))  # compacted
    # The resumed run's spend artifact states exactly those, not a bound.
    spend = read_artifact(KEY_SPEND).data
    assert f"In flight at a kill: {in_flight} calls sent with no answer stored" in spend

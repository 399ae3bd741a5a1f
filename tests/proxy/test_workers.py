"""`tokenlens serve --workers 2`: two processes on one port, one set of numbers.

Runs the real command in a scratch directory (its own TMPDIR, so the shared metrics folder
can be seen and checked gone afterwards), sends requests on fresh connections until both
workers have served, then checks that `/metrics`, the dashboard feed and the access log each
account for every request sent, whichever worker answers the scrape.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tokenlens.policy import write_policy
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.workers import wait_for

from .conftest import KEY, free_port, messages_body, standard_policy

BATCH = 12


def _metric(text: str, name: str, **labels: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def test_two_workers_share_one_port_and_one_set_of_numbers(
    fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    write_policy(standard_policy(), tmp_path / "policy")
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    access = tmp_path / "access.jsonl"
    port = free_port()
    env = {**os.environ, "TMPDIR": str(scratch_tmp), "PYTHONUNBUFFERED": "1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tokenlens",
                "serve",
                "--policy",
                str(tmp_path / "policy" / "latest.json"),
                "--upstream",
                fake_anthropic.base_url,
                "--port",
                str(port),
                "--workers",
                "2",
                "--access-log",
                str(access),
            ],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for_workers(base, process, workers=2)
            assert len(list(scratch_tmp.glob("tokenlens-metrics-*"))) == 1
            headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
            sent = 0
            # Fresh connections until both workers have served (the kernel picks who accepts).
            while sent < BATCH * 10 and (sent == 0 or len(_pids(access)) < 2):
                for _ in range(BATCH):
                    with httpx.Client() as client:
                        response = client.post(
                            f"{base}/v1/messages", json=messages_body(), headers=headers
                        )
                        assert response.status_code == 200
                    sent += 1
                time.sleep(0.2)  # the access log is written off the event loop
            assert len(_pids(access)) == 2, "one worker served everything"
            # a request is counted once its answer has gone out: the last may lag its client
            wait_for(
                lambda: (
                    _metric(httpx.get(f"{base}/metrics").text, "tokenlens_requests_total") == sent
                ),
                60,
                "every request to be counted",
            )
            for _ in range(4):  # any worker may answer; each answer must be the fleet's
                with httpx.Client() as client:
                    text = client.get(f"{base}/metrics").text
                    feed = client.get(f"{base}/tokenlens/feed.json").json()
                    html = client.get(f"{base}/tokenlens/").text
                assert f'id="requests">{sent:,}<' in html  # the page shows the fleet too
                assert _metric(text, "tokenlens_requests_total") == sent
                assert _metric(text, "tokenlens_requests_total", outcome="applied") == sent
                assert _metric(text, "tokenlens_workers") == 2
                assert _metric(text, "tokenlens_upstream_seconds_count") == sent
                assert feed["requests_total"] == sent and feed["fleet"]["workers"] == 2
                row = next(r for r in feed["classes"] if r["task_class"] == "extraction")
                assert row["requests"] == row["compressed"] == sent
                assert feed["savings"]["tokens_saved"] > 0
            # A worker killed hard: uvicorn starts a replacement, the dead one's live gauges
            # go at the next scrape, and what it counted stays counted.
            (metrics_dir,) = scratch_tmp.glob("tokenlens-metrics-*")
            victim = min(_pids(access))
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while True:
                with httpx.Client() as client:
                    try:
                        text = client.get(f"{base}/metrics", timeout=2).text
                    except httpx.HTTPError:
                        text = ""  # the killed worker held this connection's accept
                left = list(metrics_dir.glob(f"gauge_live*_{victim}.db"))
                if text and _metric(text, "tokenlens_workers") == 2 and not left:
                    break
                assert time.monotonic() < deadline, "no replacement worker, or stale gauges"
                time.sleep(0.2)
            assert _metric(text, "tokenlens_requests_total") == sent
        finally:
            process.terminate()
            process.wait(timeout=30)
    logs = log_path.read_text(errors="replace")
    lines = [json.loads(line) for line in access.read_text().splitlines()]
    assert len(lines) == sent, logs
    assert len({line["pid"] for line in lines}) == 2
    assert list(scratch_tmp.glob("tokenlens-metrics-*")) == [], "metrics folder left behind"


def _pids(access: Path) -> set[int]:
    if not access.exists():
        return set()
    return {json.loads(line)["pid"] for line in access.read_text().splitlines() if line}


def _wait_for_workers(base: str, process: subprocess.Popen[bytes], workers: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise AssertionError(f"tokenlens serve exited with {process.returncode}")
        try:
            with httpx.Client() as client:
                text = client.get(f"{base}/metrics", timeout=1).text
            if _metric(text, "tokenlens_workers") == workers:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "workers did not come up"
        time.sleep(0.1)

"""A SIGKILLed `tokenlens calibrate` (no Prefect server configured) leaves no temporary
Prefect server behind, and the next run marks the orphaned flow run Crashed.

Both runs share one PREFECT_HOME, so the second run's temporary server reads the first
one's database, where the victim's flow run was left `Running`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tokenlens.calibration.runs import list_runs
from tokenlens.testing import FakeAnthropic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

PREFECT = str(Path(sys.executable).with_name("prefect"))


def children(pid: int) -> dict[int, str]:
    """Child processes of `pid` with their command lines (from /proc)."""
    found: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                found[int(stat.parent.name)] = cmdline.decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
    return found


def gone(pid: int) -> bool:
    """No such process, or only its zombie (a container's init may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_sigkill_leaves_no_server_and_the_next_run_marks_the_flow_run_crashed(
    anthropic: FakeAnthropic, make_config: Any, tmp_path: Path
) -> None:
    config = make_config(repeats=3, concurrency=2)
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "PREFECT_API_URL" and not key.startswith("PREFECT_SERVER_")
    }
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
        DO_NOT_TRACK="1",
    )
    cli = [
        sys.executable, "-m", "tokenlens", "calibrate",
        "--backend", "anthropic", "--model", "claude-haiku-4-5",
        "--classes", ",".join(config.classes), "--max-tasks-per-class", "2",
        "--methods", ",".join(config.methods), "--rates", "0.6", "--repeats", "3",
        "--judge", "metric", "--concurrency", "2", "--max-tokens", str(config.max_tokens),
        "--store", str(config.store), "--reports", str(config.reports), "--fresh-sample",
    ]  # fmt: skip
    anthropic.configure(stall_s=120.0)
    anthropic.inject("stall", times=2)  # the victim's two workers hang on their first calls
    log = (tmp_path / "victim.log").open("w")
    victim = subprocess.Popen(cli, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # (a held request is recorded only when it ends: wait on the holds themselves)
        wait_for(lambda: anthropic.held() >= 2, 240, "the victim's workers to be held")
        servers = [
            pid
            for pid, cmd in children(victim.pid).items()
            if "prefect_server:ephemeral_app" in cmd
        ]
        assert len(servers) == 1, children(victim.pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
        log.close()
    wait_for(lambda: gone(servers[0]), 15, "the temporary server to die with its parent")

    [killed] = list_runs(config.store)
    assert killed.status == "running" and killed.flow_run_id  # nobody closed it

    anthropic.configure(stall_s=10.0)
    resumed = subprocess.run(
        [*cli[:4], "--resume", "--store", str(config.store), "--reports", str(config.reports)],
        env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert resumed.returncode in (0, 4), resumed.stderr
    assert f"flow run {killed.flow_run_id} marked Crashed" in resumed.stderr
    # One temporary server, ours: no thread of the run booted Prefect's own (its log and
    # event workers see our server too), and nothing queued was left to retry at exit.
    output = resumed.stdout + resumed.stderr
    for symptom in ("Starting temporary server", "Unable to connect", "Error logging to API"):
        assert symptom not in output, output[-3000:]
    [run] = list_runs(config.store)
    assert run.run_id == killed.run_id and run.status == "finished"
    assert run.flow_run_id != killed.flow_run_id  # the resume is a flow run of its own

    inspect = subprocess.run(
        [PREFECT, "flow-run", "inspect", str(killed.flow_run_id)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert inspect.returncode == 0, inspect.stderr
    assert "state_type=StateType.CRASHED" in inspect.stdout, inspect.stdout

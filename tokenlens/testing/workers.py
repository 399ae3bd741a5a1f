"""Real Prefect workers for tests and benches: the README's deployment path (`prefect`
CLI), `prefect worker start` processes, and their process trees read from /proc (Linux),
so a test can kill a worker, or only the flow run it started, the way an operator's
restart or the OOM killer would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PREFECT = str(Path(sys.executable).with_name("prefect"))
REPO = Path(__file__).resolve().parents[2]
POOL = "tokenlens"


def prefect_cli(args: list[str], env: dict[str, str], timeout: float = 240) -> str:
    """Run `prefect ARGS` from the checkout; its stdout (fails loudly on a non-zero exit)."""
    done = subprocess.run(
        [PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise AssertionError(f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def worker_env(api: str, **extra: str) -> dict[str, str]:
    """This process's environment for a worker of `api` that polls every second."""
    return {
        **os.environ,
        "PREFECT_API_URL": api,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        **extra,
    }


def deploy(env: dict[str, str]) -> None:
    """The README's two commands: the process pool, then every deployment of prefect.yaml."""
    prefect_cli(["work-pool", "create", POOL, "--type", "process", "--overwrite"], env)
    prefect_cli(["--no-prompt", "deploy", "--all"], env)


def start_worker(
    name: str, env: dict[str, str], *, limit: int = 1, log: Path | None = None
) -> subprocess.Popen[bytes]:
    """`prefect worker start` taking `limit` flow runs at a time, in its own session (so a
    signal to it reaches only it, as from a supervisor); its output goes to `log`."""
    command = ["worker", "start", "--pool", POOL, "--type", "process", "--limit", str(limit)]
    with open(log or os.devnull, "wb") as out:  # the worker keeps its own copy
        return subprocess.Popen(
            [PREFECT, *command, "--name", name],
            cwd=REPO,
            env=env,
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a worker and everything it started, and reap it."""
    for pid in [*descendants(process.pid), process.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=30)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def descendants(pid: int) -> list[int]:
    found = []
    for child in children(pid):
        found += [child, *descendants(child)]
    return found


def flow_run_processes(worker: int) -> list[int]:
    """The worker's flow-run processes (they run `prefect.engine`)."""
    return [pid for pid in descendants(worker) if "prefect.engine" in cmdline(pid)]


def wait_for(
    predicate: Callable[[], Any],
    timeout: float,
    what: str | Callable[[], str],
    *,
    every: float = 0.2,
) -> Any:
    """Poll every `every` seconds until `predicate()` is truthy and return it; fail naming
    `what` (a text, or a function that tells what was seen) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")

"""The temporary Prefect API server of an in-process run, owned by this process.

Without `PREFECT_API_URL`, Prefect starts its own temporary server as a child process and
stops it at interpreter exit. A SIGKILLed `tokenlens calibrate` never reaches that exit:
the server (~200 MB) stayed behind, and its flow run showed `Running` forever. So the CLI
starts the same server itself (Prefect's `create_app` in ephemeral mode: API only, no UI,
no background services, on uvicorn) as a child that the kernel terminates when this
process dies (Linux `PR_SET_PDEATHSIG`; elsewhere it is stopped on every normal exit),
and `mark_orphans_crashed` closes the flow runs whose process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from tokenlens.processes import process_alive

#: The kernel's prctl option that signals a child when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


def ephemeral_app() -> Any:
    """uvicorn factory: Prefect's API in ephemeral mode (no UI, no background services)."""
    from prefect.server.api.server import create_app

    return create_app(ephemeral=True, final=True)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn_server() -> tuple[subprocess.Popen[bytes], str]:
    """Start the server as a child that dies with us, without waiting for it; returns it
    and its API URL. It boots (~7-14 s, mostly importing Prefect's server) while the
    caller goes on with its own imports."""
    port = _free_port()
    command = [
        sys.executable, "-m", "uvicorn",
        "--factory", "tokenlens.calibration.prefect_server:ephemeral_app",
        "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "error", "--lifespan", "on",
    ]  # fmt: skip
    process = subprocess.Popen(command, preexec_fn=_die_with_parent)
    return process, f"http://127.0.0.1:{port}/api"


def wait_for_server(process: subprocess.Popen[bytes], url: str, timeout_s: float) -> None:
    """Poll the server's health until it answers; stop it and raise if it never does.

    One HTTP client for every poll: a new one per poll built an SSL context each time
    (~30 ms of CPU, five times a second) while the booting server needed the CPU."""
    import httpx

    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"the temporary Prefect server exited ({process.returncode})")
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    stop_server(process)
    raise RuntimeError(f"the temporary Prefect server did not answer within {timeout_s:.0f} s")


def start_server(timeout_s: float) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server as a child that dies with us and wait for it; returns it and its
    API URL."""
    process, url = spawn_server()
    wait_for_server(process, url, timeout_s)
    return process, url


def stop_server(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class PrefectApi:
    """The Prefect API of an in-process run: the configured one, or a temporary server.

    The server is spawned on entry, before Prefect is imported here (`PREFECT_API_URL` in
    the environment is the cheap check), so it boots while this process loads the flow;
    `connected()` then waits for it and points Prefect's settings at it. A no-op rerun
    spent ~6 s importing and then ~14 s waiting for the server, one after the other.
    """

    def __init__(self, timeout_s: float | None = None) -> None:
        self._timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._url = ""

    def __enter__(self) -> PrefectApi:
        if not os.environ.get("PREFECT_API_URL"):
            self._process, self._url = spawn_server()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._process is not None:
            stop_server(self._process)
            self._process = None

    @contextlib.contextmanager
    def connected(self) -> Iterator[str | None]:
        """Use the configured API when there is one (yields None; a server spawned in
        case is stopped), else the temporary server once it answers (yields its URL; the
        wait: PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)."""
        from prefect.settings import (
            PREFECT_API_URL,
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
            temporary_settings,
        )

        if PREFECT_API_URL.value():  # e.g. set in a Prefect profile
            self._stop()
            yield None
            return
        if self._process is None:
            self._process, self._url = spawn_server()
        wait = self._timeout_s or float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
        wait_for_server(self._process, self._url, wait)
        with temporary_settings(updates=own_server_settings(self._url)), _for_every_thread():
            try:
                yield self._url
            finally:
                _flush_api_logs()


def own_server_settings(url: str) -> dict[Any, Any]:
    """Prefect settings for flow runs on a server this process owns: its URL, and no
    flow-run heartbeats unless `PREFECT_FLOWS_HEARTBEAT_FREQUENCY` is set.

    A heartbeat lets a server that outlives the run see that it crashed; this server dies
    with the run, so nobody would read one (`mark_orphans_crashed` judges by process).
    Prefect sends them by default (every 180 s) from a thread that sleeps in 1 s steps
    and is joined as each flow run ends: 0-1 s added to every `tokenlens calibrate`."""
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY

    updates: dict[Any, Any] = {PREFECT_API_URL: url}
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" not in os.environ:
        updates[PREFECT_FLOWS_HEARTBEAT_FREQUENCY] = None
    return updates


@contextlib.contextmanager
def _for_every_thread() -> Iterator[None]:
    """The current Prefect settings (the temporary server's URL) as the process-global ones
    too, for threads that start without this context: Prefect makes its log and event
    workers lazily, in its own event-loop thread, and one made there found no API, booted
    a second temporary server of its own, and had its events retried for ~2 minutes at
    exit. Prefect's own `prefect_test_harness` does this for the same reason with this
    internal helper; without it (a Prefect that renamed it) only this context is set."""
    import prefect.context

    swap = getattr(prefect.context, "_temporary_global_settings_context", None)
    if swap is None:
        yield
        return
    with swap(prefect.context.get_settings_context()):
        yield


@contextlib.contextmanager
def prefect_api(timeout_s: float | None = None) -> Iterator[str | None]:
    """Use the configured Prefect API when there is one (yields None); else run a temporary
    server for the duration (yields its URL). Prefect's settings point at it only inside
    the block (the server's start-up wait: PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)."""
    with PrefectApi(timeout_s) as api, api.connected() as url:
        yield url


def _flush_api_logs() -> None:
    """Send the run's queued log records while the server is still up (Prefect ships them
    in the background; after the server stops they end in "Error logging to API")."""
    from prefect.logging.handlers import APILogHandler

    with contextlib.suppress(Exception):  # a log that cannot be sent must not fail the run
        APILogHandler().flush()


def mark_orphans_crashed(store: str) -> list[str]:
    """Flow runs of this store's runs whose process died (SIGKILL, power loss) are set
    Crashed, and their manifests `stopped`; returns the flow run ids marked.

    Only runs started on this host are judged (a pid means nothing elsewhere)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.states import Crashed

    from tokenlens.calibration.runs import finish_run, list_runs

    host = socket.gethostname()
    marked: list[str] = []
    for manifest in list_runs(store):
        if manifest.status != "running" or manifest.pid is None or manifest.host != host:
            continue
        if manifest.pid == os.getpid() or process_alive(manifest.pid):
            continue
        finish_run(store, manifest, "stopped")
        if manifest.flow_run_id is None:
            continue
        with get_client(sync_client=True) as client:
            try:
                flow_run = client.read_flow_run(manifest.flow_run_id)  # type: ignore[arg-type]
            except ObjectNotFound:
                continue
            if flow_run.state is None or flow_run.state.is_final():
                continue
            client.set_flow_run_state(
                flow_run.id,
                Crashed(
                    message=f"process {manifest.pid} running calibration run "
                    f"{manifest.run_id} is gone (killed?); resume it with "
                    f"`tokenlens calibrate --resume {manifest.run_id}`"
                ),
                force=True,
            )
            marked.append(str(flow_run.id))
    return marked

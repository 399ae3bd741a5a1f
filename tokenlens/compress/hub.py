"""Can this process reach the Hugging Face Hub? Decided once, in about a second at most.

Without a network, huggingface_hub retries every download with back-off, so one model
load waits 23-28 s before failing, silently, and every dry run, bench and nightly run
paid it again. So the question is asked once per process, before the first hub load:

* ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set: offline, as the user said; no probe.
* Otherwise a TCP connection to the hub endpoint (``HF_ENDPOINT``, default
  ``huggingface.co:443``), or to the HTTPS proxy that would carry the request
  (``HTTPS_PROXY`` unless ``NO_PROXY`` exempts the host), with `PROBE_TIMEOUT_S` to
  answer; name resolution included (the attempt runs in a daemon thread).

When the hub is unreachable, the process switches huggingface_hub to offline mode (the
variable and the already-imported constant), logs it once, and loads use the local
cache only: a cached model still loads, a missing one fails at once and its arm is
reported unavailable with `HubStatus.reason`. Only a connection is opened, no request
is sent: the real loading stays with huggingface_hub and transformers.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

log = logging.getLogger("tokenlens.compress")

DEFAULT_ENDPOINT = "https://huggingface.co"
#: How long the probe may take, name resolution and connection together.
PROBE_TIMEOUT_S = 1.0
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class HubStatus:
    """The process's answer. `reason` says why the hub is not used ("" when reachable)."""

    reachable: bool
    reason: str = ""
    probed: str = ""  # host:port that was tried ("" when no probe ran)


_LOCK = threading.Lock()
_status: HubStatus | None = None


def hub_status() -> HubStatus:
    """Whether hub loads may use the network; decided on the first call of the process."""
    global _status
    with _LOCK:
        if _status is None:
            _status = _decide()
            if not _status.reachable and _status.probed:
                _go_offline()
                log.warning(
                    "%s: Hugging Face loads use the local cache only in this process "
                    "(set HF_HUB_OFFLINE=1 to skip the check)",
                    _status.reason,
                )
        return _status


def forget() -> None:
    """Decide again on the next `hub_status` call (tests change the environment)."""
    global _status
    with _LOCK:
        _status = None


def offline_requested() -> bool:
    """Did the user put huggingface_hub in offline mode through the environment?"""
    return any(
        os.environ.get(name, "").upper() in _TRUE
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def probe_target() -> tuple[str, int]:
    """The (host, port) a hub request would connect to first: the endpoint or its proxy."""
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    scheme = endpoint.scheme or "https"
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if via.hostname:
            return via.hostname, via.port or (443 if via.scheme == "https" else 80)
    return host, port


def _decide() -> HubStatus:
    if offline_requested():
        return HubStatus(False, "offline (HF_HUB_OFFLINE=1)")
    host, port = probe_target()
    where = f"{host}:{port}"
    started = time.perf_counter()
    error = connect_error(host, port, PROBE_TIMEOUT_S)
    if error is None:
        return HubStatus(True, probed=where)
    took = time.perf_counter() - started
    return HubStatus(
        False, f"offline: Hugging Face Hub unreachable ({where}: {error}; {took:.2f} s)", where
    )


def connect_error(host: str, port: int, timeout: float) -> str | None:
    """None when a TCP connection to host:port opens within `timeout`, else why not."""
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                outcome.append(None)
        except OSError as exc:
            outcome.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=attempt, name="tokenlens-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        return f"no connection within {timeout:g} s"
    return outcome[0]


def _go_offline() -> None:
    """Offline mode for huggingface_hub, whether or not it is imported yet."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    if "huggingface_hub.constants" in sys.modules:  # read at its import: set it too
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = True

"""Offline detection: one quick probe per process decides whether hub loads may use the network.

The endpoint is a loopback port (closed, or listening), so the outcome never depends on
this machine's network.
"""

from __future__ import annotations

import importlib
import socket
import sys
import time
from collections.abc import Iterator

import pytest

from tokenlens.compress import hub, lingua


@pytest.fixture
def online_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """HF_HUB_OFFLINE unset (as for a user who never heard of it), no proxy, a fresh decision."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # imported earlier in the session (offline): start online
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(lingua, "_FAILED", {})
    hub.forget()
    yield monkeypatch
    hub.forget()


@pytest.fixture
def probes(online_env: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every connection attempt the probe makes."""
    seen: list[tuple[str, int]] = []
    real = hub.connect_error

    def counting(host: str, port: int, timeout: float) -> str | None:
        seen.append((host, port))
        return real(host, port, timeout)

    online_env.setattr(hub, "connect_error", counting)
    return seen


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_hub_is_probed_once_and_loads_fail_at_once(
    online_env: pytest.MonkeyPatch, probes: list[tuple[str, int]]
) -> None:
    port = _closed_port()
    online_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    models = [
        "microsoft/llmlingua-2-bert-base-multilingual-cased-probe-a",
        "microsoft/llmlingua-2-xlm-roberta-large-probe-b",
    ]
    reasons = [lingua.unavailable_reason(model) for model in models]
    assert probes == [("127.0.0.1", port)]  # once for the process, not once per load
    for model, reason in zip(models, reasons, strict=True):
        assert reason is not None and reason.startswith(f"cannot load {model}: offline")
        assert f"unreachable (127.0.0.1:{port}: ConnectionRefusedError" in reason
        assert "not in the local Hugging Face cache" in reason
    # huggingface_hub itself is in offline mode now: later loads cannot retry either
    assert importlib.import_module("huggingface_hub.constants").HF_HUB_OFFLINE is True


def test_offline_variable_is_honoured_without_a_probe(
    online_env: pytest.MonkeyPatch, probes: list[tuple[str, int]]
) -> None:
    online_env.setenv("HF_HUB_OFFLINE", "1")
    status = hub.hub_status()
    assert not status.reachable and status.reason == "offline (HF_HUB_OFFLINE=1)"
    assert probes == []


def test_reachable_endpoint_keeps_the_hub_online(
    online_env: pytest.MonkeyPatch, probes: list[tuple[str, int]]
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        online_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        status = hub.hub_status()
        assert hub.hub_status() is status  # decided once
    assert status.reachable and status.probed == f"127.0.0.1:{port}"
    assert probes == [("127.0.0.1", port)]
    constants = sys.modules.get("huggingface_hub.constants")
    assert constants is None or constants.HF_HUB_OFFLINE is False


def test_probe_goes_where_the_request_would(online_env: pytest.MonkeyPatch) -> None:
    assert hub.probe_target() == ("huggingface.co", 443)
    online_env.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert hub.probe_target() == ("127.0.0.1", 3128)
    online_env.setenv("NO_PROXY", "huggingface.co")
    assert hub.probe_target() == ("huggingface.co", 443)
    online_env.setenv("HF_ENDPOINT", "http://hub.internal:8080/")
    assert hub.probe_target() == ("hub.internal", 8080)  # HTTPS_PROXY is for https only


def test_probe_gives_up_when_nothing_answers(online_env: pytest.MonkeyPatch) -> None:
    def hang(address: tuple[str, int], timeout: float) -> socket.socket:
        time.sleep(5)
        raise OSError("too late")

    online_env.setattr(hub.socket, "create_connection", hang)
    assert hub.connect_error("hub.example", 443, 0.2) == "no connection within 0.2 s"

"""The settings flow runs get on the temporary Prefect server a calibration owns."""

from __future__ import annotations

import pytest

from tokenlens.calibration.prefect_server import own_server_settings


def _by_name(updates: dict[object, object]) -> dict[str, object]:
    return {getattr(setting, "name", str(setting)): value for setting, value in updates.items()}


def test_a_server_that_dies_with_the_run_gets_no_heartbeats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prefect joins its heartbeat thread, which sleeps in 1 s steps, as each flow run
    ends; nobody reads a heartbeat on a server that stops with the process."""
    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    from prefect.settings import get_current_settings, temporary_settings

    updates = own_server_settings("http://127.0.0.1:1/api")
    assert _by_name(updates) == {
        "PREFECT_API_URL": "http://127.0.0.1:1/api",
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": None,
    }
    with temporary_settings(updates=updates):
        assert get_current_settings().flows.heartbeat_frequency is None
        assert get_current_settings().api.url == "http://127.0.0.1:1/api"


def test_heartbeats_the_user_asked_for_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "30")
    updates = own_server_settings("http://127.0.0.1:1/api")
    assert _by_name(updates) == {"PREFECT_API_URL": "http://127.0.0.1:1/api"}


def test_the_cli_runs_its_flows_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tokenlens calibrate` (PrefectApi) applies them on its temporary server (the server
    itself is stood in for: its start-up is tested by the CLI tests)."""
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    from tokenlens.calibration import prefect_server

    url = "http://127.0.0.1:9/api"
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    monkeypatch.setattr(prefect_server, "spawn_server", lambda: (object(), url))
    monkeypatch.setattr(prefect_server, "wait_for_server", lambda *args: None)
    monkeypatch.setattr(prefect_server, "stop_server", lambda process: None)
    with (
        temporary_settings(restore_defaults={PREFECT_API_URL}),
        prefect_server.PrefectApi() as api,
        api.connected() as connected,
    ):
        assert connected == url
        assert get_current_settings().api.url == url
        assert get_current_settings().flows.heartbeat_frequency is None

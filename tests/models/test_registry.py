"""Choosing a backend by name."""

from __future__ import annotations

import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models import ModelClient, make_client, resolve_backend
from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.local import LocalClient
from tokenlens.testing import FakeAnthropic


def test_auto_is_local_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert resolve_backend("auto") == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-x")
    assert resolve_backend("auto") == "anthropic"
    assert resolve_backend("local") == "local"


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown backend 'openai'"):
        resolve_backend("openai")


def test_auto_with_key_builds_the_anthropic_client(
    monkeypatch: pytest.MonkeyPatch, fake_anthropic: FakeAnthropic
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-x")
    client = make_client("auto", base_url=fake_anthropic.base_url)
    assert isinstance(client, AnthropicClient) and isinstance(client, ModelClient)
    assert client.model == "claude-haiku-4-5" and client.name == "anthropic"


def test_anthropic_without_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelCallError, match="ANTHROPIC_API_KEY"):
        make_client("anthropic")


def test_auto_without_key_is_local_and_announces_offline_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr("tokenlens.models.registry._announced", False)
    client = make_client("auto")
    assert isinstance(client, LocalClient) and isinstance(client, ModelClient)
    make_client("auto")  # announced once per process
    err = capsys.readouterr().err
    assert err.count("OFFLINE MODE") == 1 and "not Claude" in err

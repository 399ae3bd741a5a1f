"""Fixtures of the flow tests: one Prefect test server per session, the loopback Anthropic
server configured as the answer backend, and a small calibration config.

The Prefect server is started once (a fresh database costs ~25 s): every flow test and
the deployment test talk to it. Its scheduler is off, so the nightly cron never fires
during a test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.config import CalibrationConfig
from tokenlens.testing import FakeAnthropic

REPO = Path(__file__).resolve().parents[2]
#: Two classes x two tasks of the bundled set: small, but every stage has real work.
CLASSES = ("extraction", "numeric-reasoning")


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    """A Prefect server for the whole session; yields its API URL."""
    os.environ["PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED"] = "false"
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield str(PREFECT_API_URL.value())


@pytest.fixture
def anthropic(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeAnthropic]:
    """The loopback server as the Anthropic backend (dummy key; the real one is popped)."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    yield fake_anthropic


@pytest.fixture
def make_config(tmp_path: Path) -> Any:
    """A factory of calibration configs small enough for a test, on the Anthropic backend."""

    def make(root: Path | None = None, **overrides: Any) -> CalibrationConfig:
        base = root or tmp_path
        fields: dict[str, Any] = {
            "backend": "anthropic",
            "model": "claude-haiku-4-5",
            "classes": CLASSES,
            "max_tasks_per_class": 2,
            "methods": ("safe", "minify", "prune"),
            "rates": (0.6,),
            "repeats": 2,
            "judge": "metric",
            "concurrency": 4,
            "store": base / "store",
            "reports": base / "reports",
            "max_tokens": 1024,
        }
        fields.update(overrides)
        return CalibrationConfig(**fields)

    return make

"""Session-wide test settings and the servers every test shares: the loopback Anthropic
server and one Prefect server per session (a fresh database costs ~25 s; its scheduler is
off, so the nightly cron never fires during a test).

The environment is set when this file loads, before any test module imports prefect or
huggingface: Prefect must not write to ~/.prefect or phone home, and hub loads must fail
fast instead of retrying a network this machine does not have. (The imports above it read
none of these variables at import time.)
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.config import CalibrationConfig
from tokenlens.testing import FakeAnthropic

_SESSION_DIR = tempfile.mkdtemp(prefix="tokenlens-tests-")
os.environ["PREFECT_HOME"] = os.path.join(_SESSION_DIR, "prefect")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["TIKTOKEN_CACHE_DIR"] = os.path.join(_SESSION_DIR, "tiktoken")
os.environ.pop("ANTHROPIC_API_KEY", None)

REPO = Path(__file__).resolve().parents[1]
#: Two classes x two tasks of the bundled set: small, but every stage has real work.
CLASSES = ("extraction", "numeric-reasoning")


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[FakeAnthropic]:
    """A real HTTP server on 127.0.0.1 speaking the Anthropic Messages API, for the session."""
    with FakeAnthropic(seed=1234) as server:
        yield server


@pytest.fixture
def fake_anthropic(anthropic_server: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """The session's server for one test: empty request log, no faults, default settings."""
    settings = anthropic_server.settings()
    anthropic_server.reset()
    try:
        yield anthropic_server
    finally:
        # A request a stall still holds is recorded when it ends: let it end here, or it
        # lands in the next test's log (bounded: a client that never hangs up is let be).
        deadline = time.monotonic() + 5
        while anthropic_server.held() and time.monotonic() < deadline:
            time.sleep(0.01)
        anthropic_server.reset()
        anthropic_server.configure(**settings)


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

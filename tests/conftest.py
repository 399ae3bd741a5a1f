"""Session-wide test settings.

Environment first, before anything imports prefect or huggingface: Prefect must not
write to ~/.prefect or phone home, and hub loads must fail fast instead of retrying a
network this machine does not have.
"""

from __future__ import annotations

import os
import tempfile

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


# --- loopback Anthropic server (models helper) ---
# A real HTTP server on 127.0.0.1 speaking the Anthropic API (tokenlens.testing.FakeAnthropic).
# `anthropic_server` lives for the session; `fake_anthropic` hands it to one test with an
# empty request log, no faults and default settings, and restores those afterwards.
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from tokenlens.testing import FakeAnthropic  # noqa: E402


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(seed=1234) as server:
        yield server


@pytest.fixture
def fake_anthropic(anthropic_server: FakeAnthropic) -> Iterator[FakeAnthropic]:
    settings = anthropic_server.settings()
    anthropic_server.reset()
    try:
        yield anthropic_server
    finally:
        anthropic_server.reset()
        anthropic_server.configure(**settings)


# --- end loopback Anthropic server ---

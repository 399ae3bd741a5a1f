"""Session-wide test settings and the loopback Anthropic server.

The environment is set when this file loads, before any test module imports prefect or
huggingface: Prefect must not write to ~/.prefect or phone home, and hub loads must fail
fast instead of retrying a network this machine does not have. (The imports above it read
none of these variables at import time.)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

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
        anthropic_server.reset()
        anthropic_server.configure(**settings)

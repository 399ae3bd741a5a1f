"""Fixtures for the model-access tests: clients wired to the loopback Anthropic server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.retry import RetryPolicy
from tokenlens.testing import FakeAnthropic

#: Short waits so retry tests run in well under a second.
FAST_RETRY = RetryPolicy(max_attempts=4, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.01)


@pytest.fixture
def client(fake_anthropic: FakeAnthropic) -> Iterator[AnthropicClient]:
    c = AnthropicClient(
        "claude-haiku-4-5",
        api_key="sk-test-not-a-real-key",
        base_url=fake_anthropic.base_url,
        timeout_s=1.0,
        retry=FAST_RETRY,
    )
    yield c
    c.close()

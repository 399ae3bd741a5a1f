"""Test doubles that speak real protocols (a loopback Anthropic server), for tests and benches."""

from tokenlens.testing.fake_anthropic import FAULTS, FakeAnthropic, RecordedRequest

__all__ = ["FAULTS", "FakeAnthropic", "RecordedRequest"]

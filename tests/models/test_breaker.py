"""The circuit breaker above the retry policy: an upstream that is gone stops every call,
with its cause, instead of each call spending its whole backoff in turn."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tokenlens.errors import ModelCallError, UpstreamUnavailable
from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.base import CompletionRequest, Message
from tokenlens.models.breaker import BreakerPolicy, CircuitBreaker
from tokenlens.models.retry import RateLimitedError, RetryPolicy, call_with_retries

REQUEST = CompletionRequest(
    model="claude-haiku-4-5", messages=(Message(role="user", content="Hello?"),), max_tokens=16
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def refused(cause: str = "connection refused to http://127.0.0.1:9") -> ModelCallError:
    return ModelCallError(f"connection error: {cause}", retryable=True, cause=cause)


def test_opens_only_after_the_window_and_the_count_with_no_success_between() -> None:
    clock = Clock()
    breaker = CircuitBreaker(BreakerPolicy(window_s=20, min_failures=5), clock=clock)
    for second in (0, 1, 3, 7):
        clock.now = second
        breaker.failed(refused())
    clock.now = 19.9
    breaker.failed(refused())  # five failures, but not for 20 s yet: a blip
    breaker.check()
    breaker.succeeded()  # the upstream came back: the streak starts over
    clock.now = 30
    breaker.failed(refused())
    breaker.check()
    for second in (31, 33, 37, 45, 51):
        clock.now = second
        breaker.failed(refused())
    with pytest.raises(UpstreamUnavailable) as raised:
        breaker.check()
    assert raised.value.cause == "connection refused to http://127.0.0.1:9"
    message = str(raised.value)
    assert "circuit breaker open" in message and "6 attempts failed over 21 s" in message
    assert "every one: connection refused to http://127.0.0.1:9" in message


def test_names_the_commonest_cause_and_closes_after_its_cooldown() -> None:
    clock = Clock()
    breaker = CircuitBreaker(BreakerPolicy(window_s=1, min_failures=3, cooldown_s=60), clock=clock)
    for second, exc in enumerate([refused(), ModelCallError("x", status=503), refused()]):
        clock.now = second
        breaker.failed(exc)
    error = breaker.error
    assert error is not None and "2 of them: connection refused" in str(error)
    clock.now = 62  # opened at 2 s
    breaker.check()  # closed again: a long-lived process tries once more


def test_a_rate_limit_neither_opens_it_nor_counts_as_a_success() -> None:
    breaker = CircuitBreaker(BreakerPolicy(window_s=0, min_failures=2))
    policy = RetryPolicy(max_attempts=3, initial_wait_s=0.001, max_wait_s=0.001, jitter_s=0)
    outcomes: list[Exception] = [
        refused(),
        RateLimitedError("slow down", retry_after=0.001),
        refused(),
    ]

    def attempt() -> str:
        raise outcomes.pop(0)

    with pytest.raises(ModelCallError, match="gave up after 3 attempts"):
        call_with_retries(attempt, policy=policy, what="test", breaker=breaker)
    assert outcomes == []
    assert breaker.error is not None  # the 429 between the two refusals kept the streak


def test_a_call_in_its_backoff_ends_when_another_opens_the_breaker() -> None:
    breaker = CircuitBreaker(BreakerPolicy(window_s=0, min_failures=2))
    slow = RetryPolicy(max_attempts=6, initial_wait_s=30, max_wait_s=30, jitter_s=0)
    attempts = 0

    def attempt() -> str:
        nonlocal attempts
        attempts += 1
        raise refused()

    errors: list[BaseException] = []

    def waiting_call() -> None:
        try:
            call_with_retries(attempt, policy=slow, what="first", breaker=breaker)
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=waiting_call)
    first.start()
    while attempts < 1:  # the first call is now in its 30 s backoff
        time.sleep(0.001)
    breaker.failed(refused())  # a second failure elsewhere opens the breaker
    first.join(timeout=10)
    assert not first.is_alive()
    assert attempts == 1 and isinstance(errors[0], UpstreamUnavailable)


def test_a_closed_port_through_the_sdk_fails_fast_naming_the_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # the port is closed now: every connection is refused
    client = AnthropicClient(
        api_key="sk-test-not-a-real-key",
        base_url=f"http://127.0.0.1:{port}",
        retry=RetryPolicy(max_attempts=6, initial_wait_s=0.01, max_wait_s=0.02, jitter_s=0),
        breaker=CircuitBreaker(BreakerPolicy(window_s=0.05, min_failures=3)),
    )
    try:
        with pytest.raises(UpstreamUnavailable) as first:
            while True:  # calls fail (each after its retries) until the breaker opens
                try:
                    client.complete(REQUEST)
                except UpstreamUnavailable:
                    raise
                except ModelCallError as exc:
                    assert f"connection refused to http://127.0.0.1:{port}" in str(exc)
        with pytest.raises(UpstreamUnavailable):
            client.complete(REQUEST)  # refused at once, no attempt made
    finally:
        client.close()
    assert first.value.cause == f"connection refused to http://127.0.0.1:{port}"

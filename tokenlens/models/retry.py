"""The one retry layer every paid call goes through (tenacity), shared by all backends.

Why one layer: the SDK's own retries are switched off (`max_retries=0`), so a retry is
counted, logged and capped in exactly one place, and a test can assert the count from the
server's request log.

What is retried: any `ModelCallError` with `retryable=True` - the backends set it for
429 (honouring `retry-after`), 529, 5xx, timeouts, connection errors, and a structured
reply that does not parse or validate. Never retried: 400/401/403/404 and spend-limit
errors (they cannot get better by waiting). Waits are exponential with jitter and capped;
a `retry-after` is honoured up to `max_retry_after_s`. Each retry is logged with the
status and the wait, never with prompt content.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from tokenlens.errors import ModelCallError
from tokenlens.models.breaker import CircuitBreaker, UpstreamUnavailable

__all__ = [
    "InvalidOutputError",
    "RateLimitedError",
    "RetryPolicy",
    "TruncatedOutputError",
    "call_with_retries",
]

log = logging.getLogger("tokenlens.models")

T = TypeVar("T")


class RateLimitedError(ModelCallError):
    """A retryable failure that told us how long to wait (`retry-after`, seconds)."""

    def __init__(
        self, message: str, *, retry_after: float | None, status: int | None = 429
    ) -> None:
        super().__init__(message, retryable=True, status=status)
        self.retry_after = retry_after


class InvalidOutputError(ModelCallError):
    """The model replied, but not with an object that parses and matches the schema.

    Retryable within the same budget; after the last attempt it surfaces as this error
    (never as a grade or an empty object).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True, status=None)


class TruncatedOutputError(ModelCallError):
    """Generation stopped at `max_tokens`: the answer is incomplete, so it is a failure.

    Not retried (the same budget would cut it again). `completion` keeps what was paid for,
    so the caller can still store it.
    """

    def __init__(self, message: str, completion: object) -> None:
        super().__init__(message, retryable=False, status=None)
        self.completion = completion


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. Defaults suit the real API; tests pass small waits."""

    max_attempts: int = 6
    initial_wait_s: float = 1.0
    max_wait_s: float = 30.0
    jitter_s: float = 1.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, ModelCallError) and exc.retryable


def _waiter(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    backoff = wait_exponential_jitter(
        multiplier=policy.initial_wait_s, max=policy.max_wait_s, jitter=policy.jitter_s
    )

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimitedError) and exc.retry_after is not None:
            # Honour the server's word, plus a little jitter so clients do not stampede.
            jitter = backoff(state) * 0.1
            return min(exc.retry_after, policy.max_retry_after_s) + min(jitter, 1.0)
        return float(backoff(state))

    return wait


def call_with_retries(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    what: str,
    breaker: CircuitBreaker | None = None,
) -> T:
    """Run `fn` under `policy`; raise the last `ModelCallError` with the attempt count.

    With a `breaker`, every attempt is checked against it and reported to it, and a
    backoff wait ends the moment it opens: the call then raises `UpstreamUnavailable`.

    Args:
        fn: one attempt; raises `ModelCallError` (retryable or not) on failure.
        policy: attempts and waits.
        what: a short label for logs and errors (e.g. "anthropic messages claude-haiku-4-5");
            never prompt content.
    """

    def log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        status = getattr(exc, "status", None)
        log.warning(
            "%s failed (%s%s); retry %d/%d in %.2f s",
            what,
            f"status {status}, " if status else "",
            type(exc).__name__,
            state.attempt_number,
            policy.max_attempts - 1,
            wait,
        )

    attempt = fn if breaker is None else _watched(fn, breaker)
    retrying = Retrying(
        retry=retry_if_exception(_is_retryable),
        stop=stop_after_attempt(policy.max_attempts),
        wait=_waiter(policy),
        before_sleep=log_retry,
        reraise=True,
        sleep=breaker.sleep if breaker is not None else time.sleep,
    )
    try:
        return retrying(attempt)
    except UpstreamUnavailable:
        raise
    except ModelCallError as exc:
        attempts = retrying.statistics.get("attempt_number", 1)
        if exc.retryable and attempts > 1:
            message = f"{what}: gave up after {attempts} attempts: {exc}"
        elif exc.retryable:
            message = f"{what}: {exc}"
        else:
            message = f"{what}: not retried: {exc}"
        raise _with_message(exc, message) from exc


def _watched(fn: Callable[[], T], breaker: CircuitBreaker) -> Callable[[], T]:
    """One attempt as the breaker sees it: refused while open, its outcome counted."""

    def attempt() -> T:
        breaker.check()
        try:
            result = fn()
        except RateLimitedError:
            raise  # the upstream answered: slow down, not down
        except (TruncatedOutputError, InvalidOutputError):
            breaker.succeeded()  # a reply came back: the upstream works
            raise
        except ModelCallError as exc:
            breaker.failed(exc)
            raise
        breaker.succeeded()
        return result

    return attempt


def _with_message(exc: ModelCallError, message: str) -> ModelCallError:
    """A copy of `exc` (same class and fields) with a message that says what happened."""
    if isinstance(exc, TruncatedOutputError):
        return TruncatedOutputError(message, exc.completion)
    if isinstance(exc, InvalidOutputError):
        return InvalidOutputError(message)
    if isinstance(exc, RateLimitedError):
        return RateLimitedError(message, retry_after=exc.retry_after, status=exc.status)
    return ModelCallError(message, retryable=exc.retryable, status=exc.status, cause=exc.cause)

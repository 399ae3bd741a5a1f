"""A circuit breaker above the retry policy: an outage stops a run in seconds, saying why.

Why: retries are per call. With the upstream gone, each of hundreds of calls spends its
whole backoff (six attempts, ~30 s) before it fails, one after the other, so a run stays
Running for half an hour and ends with a reason about answers, not about the upstream.
The breaker watches every attempt of every call made through one client: when all of
them have failed for `window_s` (at least `min_failures` attempts, no success between),
it opens. From then on every call, and every call waiting in a backoff, ends at once with
`UpstreamUnavailable`, whose message names the cause the attempts met (e.g.
"connection refused to http://127.0.0.1:8080") and how many failed over how long. The
calibration's stream stops on that error as it does on the spend cap.

What counts: a failed attempt of any kind that says nothing about the answer itself
(connection errors, timeouts, 5xx, 529, 4xx such as 401). A rate limit (429) is the
upstream asking to slow down, not failing, and a reply that is cut off or does not parse
came from a working upstream: the first is ignored, the second counts as a success.

A long-lived process (the proxy's shadow judge) recovers on its own: `cooldown_s` after
it opened, the breaker closes and the next calls try again.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tokenlens.errors import ModelCallError, UpstreamUnavailable

__all__ = ["BreakerPolicy", "CircuitBreaker", "UpstreamUnavailable"]


@dataclass(frozen=True)
class BreakerPolicy:
    """When to open. The defaults stop a dead upstream's run within ~30 s of its first
    call, and let a blip of a few seconds pass (retries absorb it)."""

    window_s: float = 20.0
    min_failures: int = 5
    cooldown_s: float = 60.0


class CircuitBreaker:
    """Thread-safe; one per client, shared by every call it makes (answers and judge)."""

    def __init__(
        self,
        policy: BreakerPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or BreakerPolicy()
        self._clock = clock
        self._lock = threading.Lock()
        self._opened = threading.Event()
        self._first_failure: float | None = None
        self._causes: Counter[str] = Counter()
        self._error: UpstreamUnavailable | None = None
        self._opened_at = 0.0

    @property
    def error(self) -> UpstreamUnavailable | None:
        """The error calls end with while the breaker is open (None: closed)."""
        with self._lock:
            self._maybe_close()
            return self._error

    def check(self) -> None:
        """Before an attempt: raise `UpstreamUnavailable` if the breaker is open."""
        error = self.error
        if error is not None:
            raise error

    def succeeded(self) -> None:
        with self._lock:
            self._first_failure = None
            self._causes.clear()

    def failed(self, exc: ModelCallError) -> None:
        """Count a failed attempt; open when the rule above is met."""
        if isinstance(exc, UpstreamUnavailable):
            return
        now = self._clock()
        cause = failure_cause(exc)
        with self._lock:
            if self._error is not None:
                return
            if self._first_failure is None:
                self._first_failure = now
            self._causes[cause] += 1
            failures = sum(self._causes.values())
            span = now - self._first_failure
            if failures < self.policy.min_failures or span < self.policy.window_s:
                return
            main, count = self._causes.most_common(1)[0]
            how = "every one" if count == failures else f"{count} of them"
            self._error = UpstreamUnavailable(
                f"circuit breaker open: {failures} attempts failed over {span:.0f} s with "
                f"no success ({how}: {main}); the upstream looks unavailable, so the "
                "remaining calls were not made",
                cause=main,
            )
            self._opened_at = now
            self._opened.set()

    def sleep(self, seconds: float) -> None:
        """A backoff wait that ends early when the breaker opens (tenacity's `sleep`)."""
        self._opened.wait(seconds)

    def _maybe_close(self) -> None:
        if self._error is not None and self._clock() - self._opened_at >= self.policy.cooldown_s:
            self._error = None
            self._first_failure = None
            self._causes.clear()
            self._opened.clear()


def failure_cause(exc: ModelCallError) -> str:
    """The short cause of a failed attempt: its `cause` if the backend gave one, else its
    status, else the message's first clause."""
    if exc.cause:
        return exc.cause
    return f"HTTP {exc.status}" if exc.status is not None else str(exc).split(": ", 1)[0]

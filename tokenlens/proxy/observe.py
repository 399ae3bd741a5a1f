"""What happened to one relayed request, recorded once and read by metrics and the access log.

Why one record: the relay handler fills in a plain `Observation` as it goes (class, arm,
outcome, latencies, token estimates) and hands it to the `Observer` when the response has
been sent. Metrics and the access log then read the same facts, so they cannot disagree,
and neither can see anything the record does not hold: it has no field for prompt text,
paths, queries, headers or keys.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from tokenlens.pricing import price_for

if TYPE_CHECKING:
    from tokenlens.proxy.accesslog import AccessLog

Outcome = Literal[
    "applied", "pass_through", "fail_open", "upstream_error", "proxy_error", "refused"
]
#: Label value for requests that were never classified (other routes, unparsable bodies).
UNCLASSIFIED = "-"


@dataclass
class Observation:
    """One request's facts: names, numbers and exception type names only."""

    route: str
    method: str
    started: float = field(default_factory=time.perf_counter)
    at: float = field(default_factory=time.time)
    task_class: str = UNCLASSIFIED
    #: How the class was decided (the classifier's source: header / rules / default).
    decided_by: str = UNCLASSIFIED
    arm: str = "none"
    outcome: Outcome = "pass_through"
    #: Why the outcome (a fixed word or `error:<ExceptionType>`); empty when applied.
    reason: str = "not_messages"
    status: int = 0
    duration_ms: float | None = None
    compress_ms: float | None = None
    upstream_ms: float | None = None
    tokens_original: int | None = None
    tokens_compressed: int | None = None
    #: Used for pricing only, never exported (it is client-supplied text).
    model: str = ""

    def pass_through(self, reason: str) -> None:
        self.outcome, self.reason = "pass_through", reason

    def fail_open(self, reason: str) -> None:
        self.outcome, self.reason = "fail_open", reason

    def upstream_error(self, reason: str) -> None:
        self.outcome, self.reason = "upstream_error", reason

    def refused(self, reason: str) -> None:
        """The server answered it before the relay could (see `relay.REFUSED_KEY`)."""
        self.outcome, self.reason = "refused", reason

    def applied(self, original_tokens: int, compressed_tokens: int) -> None:
        self.outcome, self.reason = "applied", ""
        self.tokens_original, self.tokens_compressed = original_tokens, compressed_tokens

    @property
    def dollars_saved(self) -> float | None:
        """Input price x estimated tokens saved; None when not applied or the model is unpriced."""
        if self.outcome != "applied" or self.tokens_original is None:
            return None
        price = price_for(self.model)
        if price is None:
            return None
        saved = max(self.tokens_original - (self.tokens_compressed or 0), 0)
        return saved * price.input_per_mtok / 1_000_000

    def log_line(self) -> dict[str, object]:
        """The access-log record: the same facts, JSON-ready."""
        return {
            "time": _iso(self.at),
            "pid": os.getpid(),
            "method": self.method,
            "route": self.route,
            "class": self.task_class,
            "decided_by": self.decided_by,
            "arm": self.arm,
            "outcome": self.outcome,
            "reason": self.reason or None,
            "status": self.status,
            "duration_ms": _ms(self.duration_ms),
            "compress_ms": _ms(self.compress_ms),
            "upstream_ms": _ms(self.upstream_ms),
            "tokens_original": self.tokens_original,
            "tokens_compressed": self.tokens_compressed,
        }


class MetricsSink(Protocol):
    """What the observer needs of the metrics (`proxy.metrics.ProxyMetrics`). A protocol, so
    this module, which the metrics read, does not import them back."""

    def observe(self, obs: Observation) -> None: ...


class Observer:
    """Hands finished observations to the metrics and, when on, the access log."""

    def __init__(self, metrics: MetricsSink, access_log: AccessLog | None = None) -> None:
        self.metrics = metrics
        self.access_log = access_log

    def finish(self, obs: Observation, status: int) -> None:
        obs.status = status
        obs.duration_ms = (time.perf_counter() - obs.started) * 1000
        if obs.outcome != "refused":  # a refusal is counted once, where the server made it
            self.metrics.observe(obs)
        if self.access_log is not None:
            self.access_log.write(obs.log_line())


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _iso(at: float) -> str:
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
    return f"{whole}.{int(at % 1 * 1000):03d}Z"

"""Counters the dashboard shows: savings, fail-opens, cache health, rolling retention.

Why plain counters in memory: the proxy records counts, never content, and keeps nothing
on disk. Every update happens on the event loop thread (background work hands its result
back to the loop), so no locks are needed. `snapshot()` is the JSON feed's payload.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from tokenlens.pricing import price_for

#: How many judge notes and compression timings the dashboard keeps.
NOTES_KEPT = 20
TIMINGS_KEPT = 512


def pair_retention(grade_comp: float, grade_clear: float) -> float | None:
    """min(comp / clear, 1.0), as the calibration reads it; None when clear is 0.

    A cleartext grade of 0 has no ratio (the request failed even uncompressed); such a
    pair is counted as unratable, never as 1.0 (same rule as `tokenlens.stats.retention`).
    """
    if grade_clear <= 0:
        return None
    return min(grade_comp / grade_clear, 1.0)


class RollingRetention:
    """The last `window` capped retentions of one class."""

    def __init__(self, window: int) -> None:
        self.values: deque[float] = deque(maxlen=window)

    def add(self, value: float) -> None:
        self.values.append(min(value, 1.0))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None


@dataclass
class ClassStats:
    """What happened to one task class's traffic."""

    requests: int = 0
    compressed: int = 0
    tokens_original: int = 0
    tokens_compressed: int = 0
    dollars_saved: float = 0.0
    sources: Counter[str] = field(default_factory=Counter)
    arms: Counter[str] = field(default_factory=Counter)
    judged: int = 0
    judge_failures: int = 0
    unratable: int = 0
    #: Set when the shadow judge pulled this class down to the floor arm.
    fallback_reason: str | None = None


@dataclass(frozen=True)
class JudgeNote:
    at: float
    task_class: str
    arm: str
    retention: float | None
    note: str


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


class ProxyStats:
    """All counters of one proxy process."""

    def __init__(self, judge_window: int = 20) -> None:
        self.started = time.time()
        self.judge_window = judge_window
        self.requests: Counter[str] = Counter()
        self.passthrough: Counter[str] = Counter()
        self.fail_opens: Counter[str] = Counter()
        self.upstream_status: Counter[str] = Counter()
        self.upstream_unreachable = 0
        #: Upstream answers that broke off or stalled mid-body (the client's was aborted), or
        #: carried a header no server may send (the client got a 502).
        self.upstream_broken = 0
        #: Clients that left before their answer was whole (their upstream call cancelled).
        self.client_gone = 0
        self.classes: dict[str, ClassStats] = {}
        self.retention: dict[str, RollingRetention] = {}
        self.notes: deque[JudgeNote] = deque(maxlen=NOTES_KEPT)
        self.compress_ms: deque[float] = deque(maxlen=TIMINGS_KEPT)
        self.tokens_original = 0
        self.tokens_compressed = 0
        self.dollars_saved = 0.0
        self.unpriced_models = 0
        self.measured = 0
        self.measure_failures = 0
        self.measured_original = 0
        self.measured_compressed = 0
        self.measured_dollars_saved = 0.0
        self.cache: Counter[str] = Counter()
        self.background_dropped = 0
        self.policy_rejections = 0
        #: Tool outputs the tool-output arms rewrote (estimated tokens before and after).
        self.tool_outputs = 0
        self.tool_tokens_original = 0
        self.tool_tokens_compressed = 0
        #: Policy loads that changed a tool-output arm: the only event that alters a
        #: prefix already sent (each costs one prompt-cache write per conversation).
        self.tool_policy_changes = 0

    # --- recording ----------------------------------------------------------------

    def for_class(self, task_class: str) -> ClassStats:
        stats = self.classes.get(task_class)
        if stats is None:
            stats = self.classes[task_class] = ClassStats()
        return stats

    def record_decision(self, task_class: str, source: str, arm_key: str | None) -> None:
        stats = self.for_class(task_class)
        stats.requests += 1
        stats.sources[source] += 1
        stats.arms[arm_key or "none"] += 1

    def record_compression(
        self, task_class: str, model: str, original: int, compressed: int, elapsed_ms: float
    ) -> None:
        """A compressed body was forwarded; `original`/`compressed` are offline estimates."""
        saved_tokens = max(original - compressed, 0)
        dollars = _input_dollars(model, saved_tokens)
        stats = self.for_class(task_class)
        stats.compressed += 1
        stats.tokens_original += original
        stats.tokens_compressed += compressed
        self.tokens_original += original
        self.tokens_compressed += compressed
        self.compress_ms.append(elapsed_ms)
        if dollars is None:
            self.unpriced_models += 1
        else:
            stats.dollars_saved += dollars
            self.dollars_saved += dollars

    def count_tool_policy_change(self) -> None:
        self.tool_policy_changes += 1

    def record_tool_output(self, original: int, compressed: int) -> None:
        """Tool outputs of one forwarded request were compressed (offline estimates)."""
        self.tool_outputs += 1
        self.tool_tokens_original += original
        self.tool_tokens_compressed += compressed

    def record_measurement(self, model: str, original: int, compressed: int) -> None:
        """Exact `count_tokens` figures for one compressed request."""
        self.measured += 1
        self.measured_original += original
        self.measured_compressed += compressed
        dollars = _input_dollars(model, max(original - compressed, 0))
        if dollars is not None:
            self.measured_dollars_saved += dollars

    def record_usage(self, usage: dict[str, Any], compressed: bool) -> None:
        """Prompt-cache health from an upstream `usage` object."""
        side = "compressed" if compressed else "original"
        for key, name in (
            ("input_tokens", "input"),
            ("cache_read_input_tokens", "cache_read"),
            ("cache_creation_input_tokens", "cache_write"),
        ):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.cache[f"{side}.{name}"] += value
        self.cache[f"{side}.responses"] += 1

    def record_judgement(
        self, task_class: str, arm_key: str, retention: float | None, note: str
    ) -> RollingRetention:
        stats = self.for_class(task_class)
        stats.judged += 1
        window = self.retention.get(task_class)
        if window is None:
            window = self.retention[task_class] = RollingRetention(self.judge_window)
        if retention is None:
            stats.unratable += 1
        else:
            window.add(retention)
        self.notes.appendleft(JudgeNote(time.time(), task_class, arm_key, retention, note))
        return window

    def reset_quality(self) -> None:
        """A new policy starts a new watch: windows and fallbacks belong to the old one."""
        self.retention.clear()
        for stats in self.classes.values():
            stats.fallback_reason = None

    # --- reading ------------------------------------------------------------------

    def cache_health(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for side in ("original", "compressed"):
            read = self.cache[f"{side}.cache_read"]
            write = self.cache[f"{side}.cache_write"]
            uncached = self.cache[f"{side}.input"]
            total = read + write + uncached
            out[side] = {
                "responses": self.cache[f"{side}.responses"],
                "input_tokens": uncached,
                "cache_read_tokens": read,
                "cache_write_tokens": write,
                "hit_rate": (read / total) if total else None,
            }
        return out

    def snapshot(self) -> dict[str, Any]:
        timings = list(self.compress_ms)
        saved = self.tokens_original - self.tokens_compressed
        measured_saved = self.measured_original - self.measured_compressed
        return {
            "uptime_s": round(time.time() - self.started, 1),
            "requests": dict(self.requests),
            "requests_total": sum(self.requests.values()),
            "passthrough": dict(self.passthrough),
            "fail_opens": dict(self.fail_opens),
            "fail_opens_total": sum(self.fail_opens.values()),
            "upstream_status": dict(self.upstream_status),
            "upstream_unreachable": self.upstream_unreachable,
            "upstream_broken": self.upstream_broken,
            "client_gone": self.client_gone,
            "savings": {
                "basis": "estimate (cl100k_base, offline)",
                "tokens_original": self.tokens_original,
                "tokens_compressed": self.tokens_compressed,
                "tokens_saved": saved,
                "reduction": (saved / self.tokens_original) if self.tokens_original else None,
                "dollars_saved": self.dollars_saved,
                "unpriced_requests": self.unpriced_models,
            },
            "tool_output": {
                "basis": "estimate (cl100k_base, offline)",
                "requests": self.tool_outputs,
                "tokens_original": self.tool_tokens_original,
                "tokens_compressed": self.tool_tokens_compressed,
                "tokens_saved": self.tool_tokens_original - self.tool_tokens_compressed,
                "reduction": (1 - self.tool_tokens_compressed / self.tool_tokens_original)
                if self.tool_tokens_original
                else None,
                "policy_changes": self.tool_policy_changes,
            },
            "measured": {
                "basis": "exact (upstream count_tokens)",
                "requests": self.measured,
                "failures": self.measure_failures,
                "tokens_original": self.measured_original,
                "tokens_compressed": self.measured_compressed,
                "tokens_saved": measured_saved,
                "reduction": (measured_saved / self.measured_original)
                if self.measured_original
                else None,
                "dollars_saved": self.measured_dollars_saved,
            },
            "compress_ms": {
                "n": len(timings),
                "p50": percentile(timings, 50),
                "p99": percentile(timings, 99),
            },
            "cache": self.cache_health(),
            "background_dropped": self.background_dropped,
            "policy_rejections": self.policy_rejections,
            "notes": [
                {
                    "at": note.at,
                    "task_class": note.task_class,
                    "arm": note.arm,
                    "retention": note.retention,
                    "note": note.note,
                }
                for note in self.notes
            ],
        }


def _input_dollars(model: str, tokens: int) -> float | None:
    price = price_for(model)
    if price is None:
        return None
    return tokens * price.input_per_mtok / 1_000_000

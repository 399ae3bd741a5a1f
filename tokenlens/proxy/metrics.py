"""`GET /metrics`: the proxy's counters in Prometheus text format, via `prometheus_client`.

Two ways values get here. Per-request facts (class, arm, outcome, status, latencies, token
estimates, dollars) come from the `Observation` each request leaves behind. Everything
`ProxyStats` already keeps for the dashboard (shadow-judge windows, prompt-cache usage,
exact counts, dropped background jobs) is mirrored by `sync(stats)`, which the app calls
on its poll tick and before each scrape, so no other module needs a metrics hook.

With `--workers N` every process writes its values to files in `PROMETHEUS_MULTIPROC_DIR`
(prometheus_client's multiprocess mode, chosen when prometheus_client is first imported)
and a scrape, served by any worker, reads all of them: counters and histograms sum over
workers, live gauges use the mode each declares. Labels are names the proxy chose (class,
arm, outcome, reason, status, route); no label can carry prompt text, a path or a key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric

from tokenlens.policy import Policy
from tokenlens.processes import process_alive
from tokenlens.proxy.observe import UNCLASSIFIED, Observation
from tokenlens.proxy.stats import ProxyStats

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
COMPRESS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
UPSTREAM_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    *(30.0, 60.0, 120.0, 300.0, 600.0),
)


def multiprocess_dir() -> str | None:
    """The shared metrics directory when running as one of several workers."""
    return os.environ.get(MULTIPROC_ENV) or None


class ProxyMetrics:
    """The proxy's metric families, on a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter(
            "tokenlens_requests",
            "Relayed requests by route, class, arm, outcome and the status the client got.",
            ["route", "task_class", "arm", "outcome", "status"],
            registry=registry,
        )
        self.reasons = Counter(
            "tokenlens_outcome_reasons",
            "Why a request passed through, failed open or hit an upstream error.",
            ["outcome", "reason"],
            registry=registry,
        )
        self.classified = Counter(
            "tokenlens_classified",
            "Messages requests by class and how the class was decided.",
            ["task_class", "decided_by"],
            registry=registry,
        )
        self.tokens = Counter(
            "tokenlens_prompt_tokens",
            "Prompt tokens of compressed requests before and after compression (estimate).",
            ["task_class", "stage"],
            registry=registry,
        )
        self.dollars = Counter(
            "tokenlens_dollars_saved",
            "Input price x tokens saved, from the pricing table (estimate).",
            ["task_class"],
            registry=registry,
        )
        self.unpriced = Counter(
            "tokenlens_unpriced_requests",
            "Compressed requests whose model has no price in the table.",
            registry=registry,
        )
        self.tool_tokens = Counter(
            "tokenlens_tool_output_tokens",
            "Tool-output tokens of compressed requests before and after the tool-output arms "
            "(estimate; also counted in tokenlens_prompt_tokens).",
            ["stage"],
            registry=registry,
        )
        self.tool_policy_changes = Counter(
            "tokenlens_tool_policy_changes",
            "Policy loads that changed a tool-output arm: the only event that alters a prompt "
            "prefix already sent (one cache write per conversation).",
            registry=registry,
        )
        self.compress_seconds = Histogram(
            "tokenlens_compression_seconds",
            "Time spent compressing a request body (including failed attempts).",
            ["task_class", "arm"],
            buckets=COMPRESS_BUCKETS,
            registry=registry,
        )
        self.upstream_seconds = Histogram(
            "tokenlens_upstream_seconds",
            "Time from sending a request upstream to its response headers.",
            ["route"],
            buckets=UPSTREAM_BUCKETS,
            registry=registry,
        )
        self.request_seconds = Histogram(
            "tokenlens_request_seconds",
            "Time from a request's arrival to the last byte of its answer.",
            ["route"],
            buckets=UPSTREAM_BUCKETS,
            registry=registry,
        )
        self.retention = Gauge(
            "tokenlens_shadow_retention",
            "Shadow-judge rolling retention per class (NaN: no judged pair in the window).",
            ["task_class"],
            multiprocess_mode="liveall",
            registry=registry,
        )
        self.window_pairs = Gauge(
            "tokenlens_shadow_window_pairs",
            "Judged pairs in the rolling window per class (summed over workers).",
            ["task_class"],
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.window_sum = Gauge(
            "tokenlens_shadow_window_retention_sum",
            "Sum of the retentions in the rolling window per class (pooled mean = sum / pairs).",
            ["task_class"],
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.fallback = Gauge(
            "tokenlens_class_fallback",
            "1 when the shadow judge pulled the class down to the floor arm.",
            ["task_class"],
            multiprocess_mode="livemax",
            registry=registry,
        )
        self.judgements = Counter(
            "tokenlens_shadow_judgements",
            "Shadow judgements per class: judged (graded or unratable) and failed.",
            ["task_class", "result"],
            registry=registry,
        )
        self.policy_info = Gauge(
            "tokenlens_policy_info",
            "1 for the calibration whose policy is in force.",
            ["calibration_id"],
            multiprocess_mode="livemax",
            registry=registry,
        )
        self.policy_loaded = Gauge(
            "tokenlens_policy_loaded_timestamp_seconds",
            "Unix time the policy in force was loaded.",
            multiprocess_mode="livemax",
            registry=registry,
        )
        entry_gauges = {
            "certified": (
                "tokenlens_policy_entry_certified_timestamp_seconds",
                "Unix time the run that measured the class's entry in force published it "
                "(0: no arm, or a file without dates).",
            ),
            "expires": (
                "tokenlens_policy_entry_expires_timestamp_seconds",
                "Unix time after which the class's entry is no longer applied (0: no limit).",
            ),
            "carried": (
                "tokenlens_policy_entry_carried_over_since_timestamp_seconds",
                "Unix time since which the class's entry is carried over from an earlier run "
                "because newer runs could not measure the class (0: not carried over).",
            ),
            "expired": (
                "tokenlens_policy_entry_expired",
                "1 when the class's entry is past its age limit and is not applied (safe only).",
            ),
        }
        self.entry_gauges = {
            key: Gauge(name, text, ["task_class"], multiprocess_mode="livemax", registry=registry)
            for key, (name, text) in entry_gauges.items()
        }
        self._policy: Policy | None = None
        self.policy_polls = Counter(
            "tokenlens_policy_polls",
            "Policy source checks by result (unchanged, not_modified, reloaded, failed).",
            ["result"],
            registry=registry,
        )
        self.policy_failures = Counter(
            "tokenlens_policy_reload_failures",
            "Policy reloads that failed (unreachable or invalid); the last good one stayed.",
            ["reason"],
            registry=registry,
        )
        self.usage_tokens = Counter(
            "tokenlens_upstream_usage_tokens",
            "Input tokens the upstream reported, by request side and cache kind.",
            ["side", "kind"],
            registry=registry,
        )
        self.usage_responses = Counter(
            "tokenlens_upstream_usage_responses",
            "Upstream answers that carried a usage object, by request side.",
            ["side"],
            registry=registry,
        )
        self.measured = Counter(
            "tokenlens_measured_requests",
            "Exact count_tokens measurements (--measure) by result.",
            ["result"],
            registry=registry,
        )
        self.measured_tokens = Counter(
            "tokenlens_measured_tokens",
            "Exact prompt tokens of measured requests before and after compression.",
            ["stage"],
            registry=registry,
        )
        self.measured_dollars = Counter(
            "tokenlens_measured_dollars_saved",
            "Dollars saved by measured requests, from exact counts.",
            registry=registry,
        )
        self.background_dropped = Counter(
            "tokenlens_background_dropped",
            "Background jobs (measure, judge) dropped because the limit was reached.",
            registry=registry,
        )
        self.upstream_discarded = Counter(
            "tokenlens_upstream_connections_discarded",
            "Pooled upstream connections closed at reuse because data nobody asked for "
            "arrived on them while idle (the request went out on another).",
            ["reason"],
            registry=registry,
        )
        self.refused = Counter(
            "tokenlens_refused_requests",
            "Requests answered before the relay saw them: 400 unparsable, 408 head or body "
            "too slow, 431 headers over the limits.",
            ["status", "reason"],
            registry=registry,
        )
        self.workers = Gauge(
            "tokenlens_workers",
            "Proxy worker processes serving this port.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.workers.set(1)
        self._seen: dict[str, float] = {}
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._calibration: str | None = None

    # --- per request -------------------------------------------------------------------

    def observe(self, obs: Observation) -> None:
        child = self._child
        child(self.requests, obs.route, obs.task_class, obs.arm, obs.outcome, str(obs.status)).inc()
        if obs.reason:
            child(self.reasons, obs.outcome, obs.reason).inc()
        if obs.decided_by != UNCLASSIFIED:
            child(self.classified, obs.task_class, obs.decided_by).inc()
        if obs.compress_ms is not None:
            child(self.compress_seconds, obs.task_class, obs.arm).observe(obs.compress_ms / 1000)
        if obs.upstream_ms is not None:
            child(self.upstream_seconds, obs.route).observe(obs.upstream_ms / 1000)
        if obs.duration_ms is not None:
            child(self.request_seconds, obs.route).observe(obs.duration_ms / 1000)
        if obs.outcome == "applied" and obs.tokens_original is not None:
            self.tokens.labels(obs.task_class, "original").inc(obs.tokens_original)
            self.tokens.labels(obs.task_class, "compressed").inc(obs.tokens_compressed or 0)
            dollars = obs.dollars_saved
            if dollars is None:
                self.unpriced.inc()
            else:
                self.dollars.labels(obs.task_class).inc(dollars)

    def _child(self, family: Any, *values: str) -> Any:
        """`family.labels(*values)`, remembered: prometheus_client checks the values and takes
        a lock on every `labels` call (four per request). The label values are names the
        proxy chose, so the cache is as bounded as the families themselves."""
        key = (id(family), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = family.labels(*values)
        return child

    def refused_request(self, status: int, reason: str) -> None:
        self.refused.labels(str(status), reason).inc()

    # --- policy ------------------------------------------------------------------------

    def policy_in_force(self, policy: Policy, loaded_at: float) -> None:
        if self._calibration is not None and self._calibration != policy.calibration_id:
            self.policy_info.labels(self._calibration).set(0)
        self._calibration = policy.calibration_id
        self.policy_info.labels(policy.calibration_id).set(1)
        self.policy_loaded.set(loaded_at)
        gone = set(self._policy.classes) - set(policy.classes) if self._policy else set()
        for name in gone:
            for gauge in self.entry_gauges.values():
                gauge.labels(name).set(0)
        self._policy = policy
        self.entries_now()

    def entries_now(self, now: datetime | None = None) -> None:
        """Per class of the policy in force: certified, expires, carried over since, expired.

        Called on every reload and every tick: an entry expires with time, not with a file."""
        if self._policy is None:
            return
        now = now or datetime.now(UTC)
        for name, entry in [*self._policy.classes.items(), ("default", self._policy.default)]:
            dated = entry.arm is not None
            carried = entry.carried_over
            values = {
                "certified": entry.certified_at.timestamp()
                if dated and entry.certified_at
                else 0.0,
                "expires": entry.expires_at.timestamp() if dated and entry.expires_at else 0.0,
                "carried": carried.since.timestamp() if dated and carried else 0.0,
                "expired": 1.0 if dated and entry.expired(now) else 0.0,
            }
            for key, value in values.items():
                self.entry_gauges[key].labels(name).set(value)

    def policy_polled(self, result: str) -> None:
        """`result`: unchanged | not_modified | reloaded | unreachable | invalid."""
        self.policy_polls.labels(result).inc()
        if result in ("unreachable", "invalid"):
            self.policy_failures.labels(result).inc()

    # --- mirrored from ProxyStats ------------------------------------------------------

    def sync(self, stats: ProxyStats) -> None:
        """Bring the mirrored families up to date with `stats` (counters by their deltas)."""
        self.entries_now()
        for key, value in stats.cache.items():
            side, _, kind = key.partition(".")
            if kind == "responses":
                self._add(key, value, self.usage_responses.labels(side))
            else:
                self._add(key, value, self.usage_tokens.labels(side, kind))
        self._add("measured.ok", stats.measured, self.measured.labels("ok"))
        self._add("measured.failed", stats.measure_failures, self.measured.labels("failed"))
        self._add(
            "measured.original", stats.measured_original, self.measured_tokens.labels("original")
        )
        self._add(
            "measured.compressed",
            stats.measured_compressed,
            self.measured_tokens.labels("compressed"),
        )
        self._add("measured.dollars", stats.measured_dollars_saved, self.measured_dollars)
        self._add("background.dropped", stats.background_dropped, self.background_dropped)
        self._add("tool.original", stats.tool_tokens_original, self.tool_tokens.labels("original"))
        self._add(
            "tool.compressed", stats.tool_tokens_compressed, self.tool_tokens.labels("compressed")
        )
        self._add("tool.policy_changes", stats.tool_policy_changes, self.tool_policy_changes)
        for name, class_stats in stats.classes.items():
            window = stats.retention.get(name)
            if class_stats.judged == 0 and class_stats.judge_failures == 0 and window is None:
                continue
            self._add(f"judged.{name}", class_stats.judged, self.judgements.labels(name, "judged"))
            self._add(
                f"judge_failed.{name}",
                class_stats.judge_failures,
                self.judgements.labels(name, "failed"),
            )
            values = list(window.values) if window is not None else []
            self.window_pairs.labels(name).set(len(values))
            self.window_sum.labels(name).set(sum(values))
            self.retention.labels(name).set(sum(values) / len(values) if values else math.nan)
            self.fallback.labels(name).set(1 if class_stats.fallback_reason else 0)

    def _add(self, key: str, total: float, counter: Counter) -> None:
        delta = total - self._seen.get(key, 0.0)
        if delta > 0:
            counter.inc(delta)
            self._seen[key] = total

    # --- reading -----------------------------------------------------------------------

    def families(self) -> Iterable[Metric]:
        """All families as a scrape sees them: every worker's in multiprocess mode."""
        return self._scraped().collect()

    def render(self) -> bytes:
        return generate_latest(self._scraped())

    def _scraped(self) -> CollectorRegistry:
        folder = multiprocess_dir()
        if folder is None:
            return self.registry
        reap_dead_workers(folder)
        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=folder)
        return merged

    def close(self) -> None:
        """This worker is going away: drop its live gauges from the shared directory."""
        if multiprocess_dir() is not None:
            multiprocess.mark_process_dead(os.getpid())


def reap_dead_workers(folder: str) -> None:
    """Drop the live gauges of workers that died without saying so (killed, crashed).

    A worker that shuts down cleanly marks itself dead (`close`); one killed hard leaves its
    `gauge_live*_<pid>.db` files behind, and `tokenlens_workers` would count it forever
    after uvicorn starts its replacement. Counters and histograms are kept: what a dead
    worker counted still happened.
    """
    for path in Path(folder).glob("gauge_live*_*.db"):
        pid_text = path.stem.rpartition("_")[2]
        if pid_text.isdigit() and not process_alive(int(pid_text)):
            multiprocess.mark_process_dead(int(pid_text), folder)

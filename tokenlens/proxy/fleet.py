"""The dashboard's feed summed over `--workers N` processes, read from the shared metrics.

Why the metrics and not a second channel: with several workers every process keeps its own
`ProxyStats`, and a dashboard request lands on one of them. The workers already write
every count to prometheus_client's multiprocess files (see `tokenlens.proxy.metrics`), so
the feed takes its totals from those files: any worker answers with the whole fleet's
requests, outcomes, tokens, dollars, cache usage, exact counts and pooled shadow-judge
windows. What cannot be summed stays this worker's own and is listed as such in
`feed["fleet"]["local"]`: judge notes, compression-time percentiles, pending background
jobs, the policy file status. Mirrored values (cache, measured, judge windows) lag by at
most one poll tick of the other workers.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.metrics_core import Metric

from tokenlens.proxy.stats import ProxyStats

#: The pass-through reasons the single-process feed counts (others are routine traffic).
PASSTHROUGH_REASONS = ("too_large", "not_json", "no_arm", "no_gain")
LOCAL_FIELDS = ("notes", "compress_ms", "background_pending", "policy", "uptime_s")

Samples = dict[str, list[tuple[dict[str, str], float]]]


def collect_samples(families: Iterable[Metric]) -> Samples:
    """Sample name -> [(labels, value)], over every family."""
    out: Samples = defaultdict(list)
    for family in families:
        for sample in family.samples:
            out[sample.name].append((dict(sample.labels), float(sample.value)))
    return out


def total(
    samples: Samples, name: str, where: Callable[[dict[str, str]], bool] | None = None
) -> float:
    return sum(value for labels, value in samples.get(name, []) if where is None or where(labels))


def by_label(
    samples: Samples, name: str, label: str, where: Callable[[dict[str, str]], bool] | None = None
) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for labels, value in samples.get(name, []):
        if where is None or where(labels):
            out[labels.get(label, "")] += value
    return dict(out)


def fleet_feed(feed: dict[str, Any], families: Iterable[Metric]) -> dict[str, Any]:
    """`feed` (this worker's) with every summable figure replaced by the fleet's."""
    s = collect_samples(families)
    requests = by_label(s, "tokenlens_requests_total", "route")
    feed["requests"] = {route: int(n) for route, n in requests.items() if n}
    feed["requests_total"] = int(sum(requests.values()))

    def reasons(outcome: str) -> dict[str, int]:
        found = by_label(
            s, "tokenlens_outcome_reasons_total", "reason", lambda lb: lb["outcome"] == outcome
        )
        return {reason: int(n) for reason, n in found.items() if n}

    feed["passthrough"] = {
        k: v for k, v in reasons("pass_through").items() if k in PASSTHROUGH_REASONS
    }
    feed["fail_opens"] = reasons("fail_open")
    feed["fail_opens_total"] = sum(feed["fail_opens"].values())
    feed["upstream_unreachable"] = sum(
        n for reason, n in reasons("upstream_error").items() if not reason.startswith("body:")
    )
    statuses: Counter[str] = Counter()
    for labels, value in s.get("tokenlens_requests_total", []):
        if labels["outcome"] not in ("upstream_error", "proxy_error") and labels["status"] != "499":
            statuses[f"{labels['status'][:1]}xx"] += int(value)
    feed["upstream_status"] = {k: v for k, v in statuses.items() if v}

    tokens = by_label(s, "tokenlens_prompt_tokens_total", "stage")
    original, compressed = int(tokens.get("original", 0)), int(tokens.get("compressed", 0))
    feed["savings"].update(
        tokens_original=original,
        tokens_compressed=compressed,
        tokens_saved=original - compressed,
        reduction=((original - compressed) / original) if original else None,
        dollars_saved=total(s, "tokenlens_dollars_saved_total"),
        unpriced_requests=int(total(s, "tokenlens_unpriced_requests_total")),
    )
    measured = by_label(s, "tokenlens_measured_requests_total", "result")
    exact = by_label(s, "tokenlens_measured_tokens_total", "stage")
    m_original, m_compressed = int(exact.get("original", 0)), int(exact.get("compressed", 0))
    feed["measured"].update(
        requests=int(measured.get("ok", 0)),
        failures=int(measured.get("failed", 0)),
        tokens_original=m_original,
        tokens_compressed=m_compressed,
        tokens_saved=m_original - m_compressed,
        reduction=((m_original - m_compressed) / m_original) if m_original else None,
        dollars_saved=total(s, "tokenlens_measured_dollars_saved_total"),
    )
    feed["cache"] = _cache(s)
    feed["background_dropped"] = int(total(s, "tokenlens_background_dropped_total"))
    _classes(feed, s)
    calibrations = by_label(s, "tokenlens_policy_info", "calibration_id", lambda lb: True)
    feed["fleet"] = {
        "workers": int(total(s, "tokenlens_workers")),
        "this_worker_pid": os.getpid(),
        "calibrations_in_force": {cid: int(n) for cid, n in calibrations.items() if n},
        "basis": "summed over all workers from the shared Prometheus multiprocess files",
        "local": list(LOCAL_FIELDS),
    }
    return feed


def _cache(s: Samples) -> dict[str, Any]:
    """Cache health from the usage counters, computed by the same code as one process."""
    scratch = ProxyStats()
    for labels, value in s.get("tokenlens_upstream_usage_tokens_total", []):
        scratch.cache[f"{labels['side']}.{labels['kind']}"] += int(value)
    for labels, value in s.get("tokenlens_upstream_usage_responses_total", []):
        scratch.cache[f"{labels['side']}.responses"] += int(value)
    return scratch.cache_health()


def _classes(feed: dict[str, Any], s: Samples) -> None:
    def per_class(
        name: str, where: Callable[[dict[str, str]], bool] | None = None
    ) -> dict[str, float]:
        return by_label(s, name, "task_class", where)

    requests = per_class("tokenlens_classified_total")
    applied = per_class("tokenlens_requests_total", lambda lb: lb["outcome"] == "applied")
    original = per_class("tokenlens_prompt_tokens_total", lambda lb: lb["stage"] == "original")
    compressed = per_class("tokenlens_prompt_tokens_total", lambda lb: lb["stage"] == "compressed")
    dollars = per_class("tokenlens_dollars_saved_total")
    pairs = per_class("tokenlens_shadow_window_pairs")
    sums = per_class("tokenlens_shadow_window_retention_sum")
    judged = per_class("tokenlens_shadow_judgements_total", lambda lb: lb["result"] == "judged")
    failed = per_class("tokenlens_shadow_judgements_total", lambda lb: lb["result"] == "failed")
    fallen = per_class("tokenlens_class_fallback")
    for row in feed["classes"]:
        name = row["task_class"]
        n = int(pairs.get(name, 0))
        row.update(
            requests=int(requests.get(name, 0)),
            compressed=int(applied.get(name, 0)),
            tokens_saved=int(original.get(name, 0) - compressed.get(name, 0)),
            dollars_saved=dollars.get(name, 0.0),
            live_retention=(sums.get(name, 0.0) / n) if n else None,
            live_n=n,
            judged=int(judged.get(name, 0)),
            judge_failures=int(failed.get(name, 0)),
            fallback_in_fleet=bool(fallen.get(name, 0)),
        )
    n_all = int(sum(pairs.values()))
    feed["quality"].update(
        retained=(sum(sums.values()) / n_all) if n_all else None,
        n=n_all,
    )

"""The dashboard at `/tokenlens/` and its JSON feed at `/tokenlens/feed.json`.

Why server-rendered HTML with no script: the page works in any browser, is testable with
a DOM dump, and cannot execute anything a request smuggled into it. The page is an
autoescaped Jinja2 template (`templates/dashboard.html.j2`), and the Content-Security-Policy
forbids scripts anyway.
Tokens saved never stands alone: quality retained sits next to it, with its sample size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tokenlens.classifier.classify import DEFAULT_CLASS
from tokenlens.formatting import count, pct, usd
from tokenlens.policy import VERDICT_MARK, PolicyEntry
from tokenlens.proxy.apply import choose_arm
from tokenlens.proxy.state import ProxyState
from tokenlens.templating import render

REFRESH_S = 5
#: How a missing figure reads on the dashboard.
MISSING = "–"
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _public_url(url: str) -> str:
    """An URL without any user:password part."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def build_feed(state: ProxyState) -> dict[str, Any]:
    """Everything the dashboard shows, as JSON-ready data (counts and names, no content)."""
    settings = state.settings
    stats = state.stats
    feed = stats.snapshot()
    policy = state.store.policy if state.store is not None else None
    rows: list[dict[str, Any]] = []
    names: list[str] = list(policy.classes) if policy is not None else []
    names += [DEFAULT_CLASS, *sorted(set(stats.classes) - set(names) - {DEFAULT_CLASS})]
    live_values: list[float] = []
    now = datetime.now(UTC)
    for name in names:
        class_stats = stats.for_class(name) if name in stats.classes else None
        window = stats.retention.get(name)
        if window is not None:
            live_values.extend(window.values)
        fallen = class_stats is not None and class_stats.fallback_reason is not None
        choice = choose_arm(
            policy,
            name,
            override=settings.override_arm,
            allow_provisional=settings.allow_provisional,
            fallen_back=fallen,
            now=now,
        )
        row: dict[str, Any] = {
            "task_class": name,
            "arm_in_force": choice.arm.key if choice.arm else "none",
            "arm_label": choice.arm.label if choice.arm else "none (original bytes)",
            "why": choice.why,
            "requests": class_stats.requests if class_stats else 0,
            "compressed": class_stats.compressed if class_stats else 0,
            "tokens_saved": (class_stats.tokens_original - class_stats.tokens_compressed)
            if class_stats
            else 0,
            "dollars_saved": class_stats.dollars_saved if class_stats else 0.0,
            "live_retention": window.mean if window else None,
            "live_n": window.n if window else 0,
            "judged": class_stats.judged if class_stats else 0,
            "judge_failures": class_stats.judge_failures if class_stats else 0,
            "fallback": class_stats.fallback_reason if class_stats else None,
        }
        if policy is not None:
            entry = policy.entry_for(name)
            row.update(
                verdict=entry.verdict,
                mark=VERDICT_MARK[entry.verdict],
                policy_arm=entry.arm.key if entry.arm else "none",
                bar=entry.bar if entry.bar is not None else policy.tolerance,
                calibrated_retention=entry.retention_mean,
                calibrated_interval=(
                    [entry.retention_interval.low, entry.retention_interval.high]
                    if entry.retention_interval
                    else None
                ),
                reduction_pct=entry.reduction_pct,
                reason=entry.reason,
                **_entry_dates(entry, now),
            )
        rows.append(row)
    feed["quality"] = {
        "basis": "shadow judge: compressed answer vs the cleartext answer (capped at 1.0)",
        "retained": (sum(live_values) / len(live_values)) if live_values else None,
        "n": len(live_values),
    }
    feed["classes"] = rows
    feed["background_pending"] = state.background.pending
    feed["policy"] = (
        {
            "path": str(state.store.path) if state.store else None,
            "calibration_id": policy.calibration_id,
            "model": policy.model,
            "judge": policy.judge,
            "tolerance": policy.tolerance,
            "mode": policy.mode,
            "created": policy.created.isoformat(),
            "loaded_at": state.store.loaded_at if state.store else None,
            "reloads": state.store.reloads if state.store else 0,
            "rejections": state.store.rejections if state.store else 0,
            "last_error": state.store.last_error if state.store else None,
        }
        if policy is not None
        else None
    )
    feed["policy_rejections"] = state.store.rejections if state.store else 0
    feed["settings"] = {
        "upstream": _public_url(settings.upstream),
        "override": settings.override_arm.key if settings.override_arm else None,
        "allow_provisional": settings.allow_provisional,
        "measure": settings.measure,
        "judge": settings.judge,
        "judge_sample": settings.judge_sample if settings.judge else None,
        "judge_model": settings.judge_model if settings.judge else None,
        "max_body_bytes": settings.max_body_bytes,
        "compress_budget_ms": settings.compress_budget_ms,
    }
    return feed


def _entry_dates(entry: PolicyEntry, now: datetime) -> dict[str, Any]:
    """When the entry was certified, until when it applies, and whether it was carried over
    from an earlier run (ISO times; None where the policy file has none)."""
    carried = entry.carried_over
    return {
        "certified_at": entry.certified_at.isoformat() if entry.certified_at else None,
        "expires_at": entry.expires_at.isoformat() if entry.expires_at else None,
        "expired": entry.arm is not None and entry.expired(now),
        "carried_over": None
        if carried is None
        else {
            "since": carried.since.isoformat(),
            "from_run": carried.from_run or carried.from_calibration,
            "why": carried.why,
        },
    }


# --- HTML ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Card:
    ident: str
    title: str
    value: str
    detail: str


@dataclass(frozen=True)
class ClassRow:
    task_class: str
    fallback: bool
    cells: list[str]


@dataclass(frozen=True)
class Note:
    when: str
    task_class: str
    arm: str
    retention: str
    text: str


def _pct(value: float | None, digits: int = 1) -> str:
    return pct(value, digits, missing=MISSING)


def _class_rows(feed: dict[str, Any]) -> list[ClassRow]:
    out = []
    for row in feed["classes"]:
        fallback = row.get("fallback")
        status = f"FALLBACK: {fallback}" if fallback else row["why"]
        interval = row.get("calibrated_interval")
        calib = _pct(row.get("calibrated_retention"))
        if interval:
            calib += f" [{_pct(interval[0])}, {_pct(interval[1])}]"
        if row.get("expired"):
            status = f"EXPIRED {_date(row['expires_at'])}: {status}"
        live = _pct(row["live_retention"])
        if row["live_n"]:
            live += f" (n={row['live_n']})"
        cells = [
            row["task_class"],
            f"{row.get('mark', '')} {row.get('verdict', 'no policy')}".strip(),
            row["arm_label"],
            status,
            _pct(row.get("bar"), 0),
            _certified_cell(row),
            calib,
            live,
            count(row["requests"], missing=MISSING),
            count(row["compressed"], missing=MISSING),
            count(row["tokens_saved"], missing=MISSING),
            usd(row["dollars_saved"], missing=MISSING),
        ]
        out.append(ClassRow(row["task_class"], bool(fallback), [str(cell) for cell in cells]))
    return out


def _date(iso: str | None) -> str:
    return MISSING if iso is None else iso[:16].replace("T", " ")


def _certified_cell(row: dict[str, Any]) -> str:
    """`2026-11-01 02:40, until 2026-11-08 02:40` and, for a carried-over entry, since when."""
    if row.get("certified_at") is None:
        return MISSING
    text = _date(row["certified_at"])
    if row.get("expires_at"):
        text += f", until {_date(row['expires_at'])}"
    carried = row.get("carried_over")
    if carried:
        text = (
            f"CARRIED OVER since {_date(carried['since'])} from run {carried['from_run']} "
            f"(certified {text})"
        )
    return text


def _notes(feed: dict[str, Any]) -> list[Note]:
    return [
        Note(
            when=time.strftime("%H:%M:%S", time.localtime(note["at"])),
            task_class=note["task_class"],
            arm=note["arm"],
            retention=_pct(note["retention"]),
            text=note["note"],
        )
        for note in feed["notes"]
    ]


def _policy_line(
    policy: dict[str, Any] | None, settings: dict[str, Any], rows: list[dict[str, Any]]
) -> str:
    if policy:
        line = (
            f"Policy {policy['calibration_id']} ({policy['path']}), model {policy['model']}, "
            f"judge {policy['judge']}, tolerance {policy['tolerance']:g}, "
            f"reloads {policy['reloads']}, rejected files {policy['rejections']}"
        )
        carried = [row["task_class"] for row in rows if row.get("carried_over")]
        if carried:
            line += (
                f". Carried over from earlier runs (newer runs could not measure them): "
                f"{', '.join(carried)}"
            )
        expired = [row["task_class"] for row in rows if row.get("expired")]
        if expired:
            line += f". Past their age limit, not applied: {', '.join(expired)}"
        if policy["last_error"]:
            line += f". Last rejected: {policy['last_error']}"
        if settings["override"]:
            line += (
                f". --compress: every request gets {settings['override']}; the policy gives "
                "only the bars and the calibrated figures."
            )
        return line
    if settings["override"]:
        return f"No policy: every request gets {settings['override']} (--compress)."
    return "No policy and no --compress: pure pass-through."


def _cards(feed: dict[str, Any]) -> list[Card]:
    savings = feed["savings"]
    measured = feed["measured"]
    quality = feed["quality"]
    cache = feed["cache"]
    fail_opens = ", ".join(f"{k}: {v}" for k, v in sorted(feed["fail_opens"].items())) or "none"
    measured_detail = (
        f"exact: {count(measured['tokens_saved'], missing=MISSING)} tokens over "
        f"{measured['requests']} requests"
        if measured["requests"]
        else "exact counts: off (--measure)"
        if not feed["settings"]["measure"]
        else "exact: pending"
    )
    compressed = sum(r["compressed"] for r in feed["classes"])
    return [
        Card(
            "tokens-saved",
            "Tokens saved",
            count(savings["tokens_saved"], missing=MISSING),
            f"{_pct(savings['reduction'])} of compressed prompts (estimate) · " + measured_detail,
        ),
        Card(
            "dollars-saved",
            "Dollars saved",
            usd(savings["dollars_saved"], missing=MISSING),
            "input price × tokens saved (estimate)",
        ),
        Card(
            "tool-output-saved",
            "Tool output saved",
            count(feed["tool_output"]["tokens_saved"], missing=MISSING),
            f"{_pct(feed['tool_output']['reduction'])} of rewritten tool outputs (estimate), "
            f"{count(feed['tool_output']['requests'], missing=MISSING)} requests",
        ),
        Card(
            "quality-retained",
            "Quality retained",
            _pct(quality["retained"]),
            f"rolling, n={quality['n']} judged pairs",
        ),
        Card(
            "requests",
            "Requests",
            count(feed["requests_total"], missing=MISSING),
            f"{count(compressed, missing=MISSING)} compressed",
        ),
        Card(
            "fail-opens", "Fail-opens", count(feed["fail_opens_total"], missing=MISSING), fail_opens
        ),
        Card(
            "cache-hit",
            "Prompt cache hit rate",
            _pct(cache["compressed"]["hit_rate"]),
            f"compressed; original traffic {_pct(cache['original']['hit_rate'])}",
        ),
    ]


def render_html(feed: dict[str, Any]) -> str:
    """The page (template `dashboard.html.j2`): every string is escaped by the template."""
    settings = feed["settings"]
    judge_line = (
        f"Shadow judge ON ({settings['judge_model']}, sample {settings['judge_sample']:g}): "
        "judged requests roughly double their spend."
        if settings["judge"]
        else "Shadow judge off (tokenlens serve --judge)."
    )
    return render(
        "dashboard.html.j2",
        refresh_s=REFRESH_S,
        policy_line=_policy_line(feed["policy"], settings, feed["classes"]),
        judge_line=judge_line,
        cards=_cards(feed),
        rows=_class_rows(feed),
        notes=_notes(feed),
        uptime=f"{feed['uptime_s']:.0f}",
    )

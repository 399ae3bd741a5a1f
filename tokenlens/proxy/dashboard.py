"""The dashboard at `/tokenlens/` and its JSON feed at `/tokenlens/feed.json`.

Why server-rendered HTML with no script: the page works in any browser, is testable with
a DOM dump, and cannot execute anything a request smuggled into it. Every dynamic string
goes through `html.escape`, and the Content-Security-Policy forbids scripts anyway.
Tokens saved never stands alone: quality retained sits next to it, with its sample size.
"""

from __future__ import annotations

import math
import time
from html import escape
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tokenlens.policy import VERDICT_MARK
from tokenlens.proxy.apply import choose_arm
from tokenlens.proxy.classify import DEFAULT_CLASS
from tokenlens.proxy.handler import ProxyState

REFRESH_S = 5
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


# --- HTML ---------------------------------------------------------------------------


def _pct(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value * 100:.{digits}f}%"


def _usd(value: float | None) -> str:
    if value is None:
        return "–"
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def _int(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _card(ident: str, title: str, value: str, detail: str) -> str:
    return (
        f'<div class="card"><div class="title">{escape(title)}</div>'
        f'<div class="value" id="{escape(ident)}">{escape(value)}</div>'
        f'<div class="detail">{escape(detail)}</div></div>'
    )


def _class_rows(feed: dict[str, Any]) -> str:
    out = []
    for row in feed["classes"]:
        fallback = row.get("fallback")
        status = f"FALLBACK: {fallback}" if fallback else row["why"]
        calibrated = row.get("calibrated_retention")
        interval = row.get("calibrated_interval")
        calib = _pct(calibrated)
        if interval:
            calib += f" [{_pct(interval[0])}, {_pct(interval[1])}]"
        live = _pct(row["live_retention"])
        if row["live_n"]:
            live += f" (n={row['live_n']})"
        cells = [
            row["task_class"],
            f"{row.get('mark', '')} {row.get('verdict', 'no policy')}".strip(),
            row["arm_label"],
            status,
            _pct(row.get("bar"), 0) if row.get("bar") is not None else "–",
            calib,
            live,
            _int(row["requests"]),
            _int(row["compressed"]),
            _int(row["tokens_saved"]),
            _usd(row["dollars_saved"]),
        ]
        css = ' class="fallback"' if fallback else ""
        tds = "".join(f"<td>{escape(str(cell))}</td>" for cell in cells)
        out.append(f'<tr{css} data-class="{escape(row["task_class"])}">{tds}</tr>')
    return "\n".join(out)


def _notes(feed: dict[str, Any]) -> str:
    if not feed["notes"]:
        return '<li class="muted">No judged requests yet.</li>'
    items = []
    for note in feed["notes"]:
        when = time.strftime("%H:%M:%S", time.localtime(note["at"]))
        items.append(
            f'<li><span class="muted">{escape(when)} · {escape(note["task_class"])} · '
            f"{escape(note['arm'])} · retention {escape(_pct(note['retention']))}</span> "
            f"{escape(note['note'])}</li>"
        )
    return "\n".join(items)


def render_html(feed: dict[str, Any]) -> str:
    savings = feed["savings"]
    measured = feed["measured"]
    quality = feed["quality"]
    cache = feed["cache"]
    policy = feed["policy"]
    settings = feed["settings"]
    fail_opens = ", ".join(f"{k}: {v}" for k, v in sorted(feed["fail_opens"].items())) or "none"
    if policy:
        policy_line = (
            f"Policy {policy['calibration_id']} ({policy['path']}), model {policy['model']}, "
            f"judge {policy['judge']}, tolerance {policy['tolerance']:g}, "
            f"reloads {policy['reloads']}, rejected files {policy['rejections']}"
        )
        if policy["last_error"]:
            policy_line += f". Last rejected: {policy['last_error']}"
    elif settings["override"]:
        policy_line = f"No policy: every request gets {settings['override']} (--compress)."
    else:
        policy_line = "No policy and no --compress: pure pass-through."
    judge_line = (
        f"Shadow judge ON ({settings['judge_model']}, sample {settings['judge_sample']:g}): "
        "judged requests roughly double their spend."
        if settings["judge"]
        else "Shadow judge off (tokenlens serve --judge)."
    )
    measured_detail = (
        f"exact: {_int(measured['tokens_saved'])} tokens over {measured['requests']} requests"
        if measured["requests"]
        else "exact counts: off (--measure)"
        if not settings["measure"]
        else "exact: pending"
    )
    cards = "".join(
        [
            _card(
                "tokens-saved",
                "Tokens saved",
                _int(savings["tokens_saved"]),
                f"{_pct(savings['reduction'])} of compressed prompts (estimate) · "
                + measured_detail,
            ),
            _card(
                "dollars-saved",
                "Dollars saved",
                _usd(savings["dollars_saved"]),
                "input price × tokens saved (estimate)",
            ),
            _card(
                "quality-retained",
                "Quality retained",
                _pct(quality["retained"]),
                f"rolling, n={quality['n']} judged pairs",
            ),
            _card(
                "requests",
                "Requests",
                _int(feed["requests_total"]),
                f"{_int(sum(r['compressed'] for r in feed['classes']))} compressed",
            ),
            _card("fail-opens", "Fail-opens", _int(feed["fail_opens_total"]), fail_opens),
            _card(
                "cache-hit",
                "Prompt cache hit rate",
                _pct(cache["compressed"]["hit_rate"]),
                f"compressed; original traffic {_pct(cache['original']['hit_rate'])}",
            ),
        ]
    )
    head = (
        "<tr><th>class</th><th>verdict</th><th>arm in force</th><th>status</th><th>bar</th>"
        "<th>calibrated retention</th><th>live retention</th><th>requests</th>"
        "<th>compressed</th><th>tokens saved</th><th>$ saved</th></tr>"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_S}">
<title>TokenLens proxy</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1d2330; background: #f6f7f9; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }}
.muted {{ color: #6b7280; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }}
.card {{ background: #fff; border: 1px solid #e3e6ea; border-radius: 8px; padding: 12px 16px;
  min-width: 170px; flex: 1; }}
.title {{ color: #6b7280; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }}
.value {{ font-size: 26px; font-weight: 600; margin: 4px 0; }}
.detail {{ color: #6b7280; font-size: 12px; }}
table {{ border-collapse: collapse; width: 100%; background: #fff; }}
th, td {{ border: 1px solid #e3e6ea; padding: 6px 8px; text-align: left; font-size: 13px; }}
th {{ background: #eef0f3; }}
tr.fallback td {{ background: #fdecea; }}
ul {{ background: #fff; border: 1px solid #e3e6ea; border-radius: 8px; padding: 8px 24px; }}
</style></head>
<body>
<h1>TokenLens proxy</h1>
<div class="muted" id="policy-line">{escape(policy_line)}</div>
<div class="muted" id="judge-line">{escape(judge_line)}</div>
<div class="cards">{cards}</div>
<h2>Policy in force per class</h2>
<table id="classes">{head}
{_class_rows(feed)}
</table>
<h2>Judge notes</h2>
<ul id="notes">
{_notes(feed)}
</ul>
<p class="muted">Token counts are offline estimates (cl100k_base) unless marked exact. Prompt
bodies and keys are never logged, stored or shown; judge notes are the one exception.
<a href="feed.json">JSON feed</a> · refreshed every {REFRESH_S} s · up {feed["uptime_s"]:.0f} s.
</p>
</body></html>
"""

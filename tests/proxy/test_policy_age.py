"""What the proxy does with the policy's dates and origin, read from nothing but the file.

- An entry carried over from an earlier run applies until its age limit; past it, the
  class gets `safe` only; `/metrics` and the dashboard say which entries are carried over,
  since when, and which expired.
- A policy calibrated offline (the embedded local model) is refused at start-up and on
  reload, from a file, an HTTP URL or an S3 store, unless `--allow-offline-policy`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tokenlens.errors import PolicyError
from tokenlens.policy import CarriedOver, Policy, PolicyEntry, write_policy
from tokenlens.proxy.app import create_app
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.proxy.settings import ProxySettings
from tokenlens.testing import FakeAnthropic

from .conftest import (
    ProxyServer,
    SdkFor,
    ThreadServer,
    entry,
    free_port,
    make_policy,
    messages_body,
)
from .test_metrics import scrape, value
from .test_policy_source import BUCKET, EtagServer, _put, s3  # noqa: F401 - the s3 fixture

StartProxy = Callable[..., ProxyServer]
NOW = datetime.now(UTC)


def dated(
    base: PolicyEntry, certified: datetime, expires: datetime, since: datetime | None = None
) -> PolicyEntry:
    carried = (
        CarriedOver(
            from_run="20261101-023000-aaaaaa",
            from_calibration="cal-00000001",
            since=since,
            since_run="20261103-023000-bbbbbb",
            why="unmeasurable — no control pair could be graded",
        )
        if since is not None
        else None
    )
    return base.model_copy(
        update={"certified_at": certified, "expires_at": expires, "carried_over": carried}
    )


def aging_policy() -> Policy:
    """extraction: carried over, still in force; summarization: carried, past its limit."""
    week_ago = NOW - timedelta(days=6)
    stale = NOW - timedelta(days=9)
    return make_policy(
        {
            "extraction": dated(
                entry("extraction", "measured", "prune", 0.5),
                week_ago,
                week_ago + timedelta(days=7),
                since=NOW - timedelta(days=2),
            ),
            "summarization": dated(
                entry("summarization", "measured", "prune", 0.5),
                stale,
                stale + timedelta(days=7),
                since=NOW - timedelta(days=3),
            ),
        }
    )


def arm_for(sdk: object, task_class: str) -> str:
    reply = sdk.messages.with_raw_response.create(  # type: ignore[attr-defined]
        **messages_body(), extra_headers={"x-tokenlens-class": task_class}
    )
    return str(reply.headers["x-tokenlens-arm"])


def test_carried_entries_apply_until_their_age_limit_and_say_so(
    tmp_path: Path, fake_anthropic: FakeAnthropic, start_proxy: StartProxy, sdk_for: SdkFor
) -> None:
    write_policy(aging_policy(), tmp_path / "policy")
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_path=tmp_path / "policy/latest.json")
    )
    sdk = sdk_for(proxy)
    assert arm_for(sdk, "extraction") == "prune@0.5"  # carried, in force
    assert arm_for(sdk, "summarization") == "safe"  # past its age limit: safe only

    _, samples = scrape(proxy)
    gauge = "tokenlens_policy_entry_carried_over_since_timestamp_seconds"
    since = value(samples, gauge, task_class="extraction")
    assert since == pytest.approx((NOW - timedelta(days=2)).timestamp())
    assert value(samples, "tokenlens_policy_entry_expired", task_class="extraction") == 0
    assert value(samples, "tokenlens_policy_entry_expired", task_class="summarization") == 1
    expires = value(
        samples, "tokenlens_policy_entry_expires_timestamp_seconds", task_class="extraction"
    )
    assert expires == pytest.approx((NOW + timedelta(days=1)).timestamp())
    certified = value(
        samples, "tokenlens_policy_entry_certified_timestamp_seconds", task_class="extraction"
    )
    assert certified == pytest.approx((NOW - timedelta(days=6)).timestamp())

    feed = proxy.feed()
    rows = {row["task_class"]: row for row in feed["classes"]}
    assert rows["extraction"]["carried_over"]["from_run"] == "20261101-023000-aaaaaa"
    assert rows["summarization"]["expired"] is True
    assert rows["summarization"]["arm_in_force"] == "safe"
    assert "past its age limit" in rows["summarization"]["why"]
    html = httpx_get(f"{proxy.base_url}/tokenlens/")
    assert "CARRIED OVER since" in html and "EXPIRED" in html
    assert "Carried over from earlier runs" in html and "Past their age limit" in html


def httpx_get(url: str) -> str:
    import httpx

    response = httpx.get(url, timeout=5)
    response.raise_for_status()
    return response.text


def offline_policy(*, backend: str | None = "local") -> Policy:
    return make_policy({"extraction": entry("extraction", "measured", "prune", 0.5)}).model_copy(
        update={"model": "SmolLM2-135M-Instruct.Q4_1", "backend": backend}
    )


def test_serve_refuses_an_offline_policy_and_says_why(tmp_path: Path) -> None:
    write_policy(offline_policy(), tmp_path / "policy")
    latest = str(tmp_path / "policy" / "latest.json")
    # A process of its own: were the policy accepted, it would serve until killed.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenlens",
            "serve",
            "--policy",
            latest,
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    err = done.stderr
    assert "refused" in err and "embedded local model" in err and "not Claude" in err
    assert "--allow-offline-policy" in err
    # A file from before the `backend` field is judged by its model name.
    write_policy(offline_policy(backend=None), tmp_path / "old")
    with pytest.raises(PolicyError, match="not a Claude model"):
        PolicyStore(tmp_path / "old" / "latest.json")
    # Asked for explicitly (a demo), it is applied.
    store = PolicyStore(latest, allow_offline=True)
    assert store.policy.model == "SmolLM2-135M-Instruct.Q4_1"
    create_app(ProxySettings(policy_path=Path(latest), allow_offline_policy=True))


def test_an_offline_policy_published_later_is_refused_on_reload(tmp_path: Path) -> None:
    write_policy(make_policy({"extraction": entry("extraction", "measured")}), tmp_path / "p")
    store = PolicyStore(tmp_path / "p" / "latest.json")
    write_policy(offline_policy(), tmp_path / "p")
    assert store.refresh() is False
    assert "embedded local model" in (store.last_error or "")
    assert store.policy.model == "claude-haiku-4-5"  # the last good one stays


def test_an_offline_policy_from_a_url_or_a_store_is_refused(s3: str) -> None:  # noqa: F811
    body = offline_policy().model_dump_json().encode()
    origin = EtagServer(body)
    server = ThreadServer(origin.app()).start()
    try:
        with pytest.raises(PolicyError, match="embedded local model"):
            PolicyStore(f"{server.base_url}/policy.json")
    finally:
        server.stop()
    _put(s3, "reports/policy/latest.json", body)
    with pytest.raises(PolicyError, match="embedded local model"):
        PolicyStore(f"s3://{BUCKET}/reports/policy/latest.json")

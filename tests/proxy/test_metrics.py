"""`GET /metrics` and `--access-log`, scraped after real traffic from the official SDK.

Values are checked against what the test sent and against the dashboard's own counters
(`ProxyStats`, an independent path), and a canary written into every prompt must appear in
neither the scrape nor the access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tokenlens.compress.arms import Arm
from tokenlens.policy import atomic_write_text, write_policy
from tokenlens.proxy.dashboard import build_feed
from tokenlens.proxy.fleet import fleet_feed
from tokenlens.proxy.settings import ProxySettings
from tokenlens.testing import FakeAnthropic

from .conftest import (
    KEY,
    MODEL,
    ProxyServer,
    SdkFor,
    ThreadServer,
    free_port,
    messages_body,
    standard_policy,
)
from .test_measure_judge import ScriptedJudge

StartProxy = Callable[..., ProxyServer]
PRUNE = Arm("prune", 0.5)
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(proxy: ProxyServer) -> tuple[str, Samples]:
    response = httpx.get(f"{proxy.base_url}/metrics", timeout=5)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return response.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    return sum(
        v
        for (n, lbs), v in samples.items()
        if n == name and all(dict(lbs).get(k) == want for k, want in labels.items())
    )


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def test_metrics_and_access_log_after_sdk_traffic(
    fake_anthropic: FakeAnthropic,
    start_proxy: StartProxy,
    policy_file: Path,
    tmp_path: Path,
    sdk_for: SdkFor,
) -> None:
    secret = f"CANARY-{uuid.uuid4().hex}"
    access = tmp_path / "access.jsonl"
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            access_log=str(access),
            compress_budget_ms=10_000,  # a busy machine must not turn `applied` into a fail-open
        )
    )
    sdk = sdk_for(proxy)
    body = messages_body(f"Who manages region 7? Reference {secret}.")
    body["system"] = f"Internal tag {secret}."
    # 3 x extraction by the rules (✓ prune@0.5), one of them streamed.
    sdk.messages.create(**body)
    sdk.messages.create(**body)
    with sdk.messages.stream(**body) as stream:
        stream.until_done()
    # 1 x summarization by header (? entry, not allowed: `safe` only).
    sdk.messages.create(**body, extra_headers={"x-tokenlens-class": "summarization"})
    # 1 x an unknown class header carrying the secret: `default`, decided by the header.
    sdk.messages.create(**body, extra_headers={"x-tokenlens-class": secret.lower()[:60]})
    # count_tokens, a body that is not JSON, a path with the secret, an upstream 500.
    sdk.messages.count_tokens(model=MODEL, messages=body["messages"])
    httpx.post(f"{proxy.base_url}/v1/messages", content=f"{{{secret}".encode(), headers=HEADERS)
    httpx.get(f"{proxy.base_url}/v1/unknown/{secret}?q={secret}", headers=HEADERS)
    fake_anthropic.inject("500", 1)
    httpx.post(f"{proxy.base_url}/v1/messages", json=body, headers=HEADERS)
    proxy.wait_idle()

    text, samples = scrape(proxy)
    assert secret not in text and secret.lower() not in text
    stats = proxy.state.stats
    requests = "tokenlens_requests_total"
    assert value(samples, requests) == 9
    assert value(samples, requests, route="messages") == 7
    assert value(samples, requests, route="count_tokens", outcome="pass_through") == 1
    applied_extraction = value(
        samples, requests, task_class="extraction", arm="prune@0.5", outcome="applied"
    )
    assert applied_extraction == 4  # two plain, one streamed, and the upstream-500 one
    assert value(samples, requests, task_class="extraction", status="500") == 1
    assert value(samples, requests, task_class="summarization", arm="safe") == 1
    assert value(samples, requests, route="other", outcome="pass_through", status="404") == 1
    assert value(samples, requests, task_class="-", route="messages", status="400") == 1
    assert value(samples, "tokenlens_outcome_reasons_total", reason="not_json") == 1
    # How the class was decided: rules for extraction, the header for the other two.
    classified = "tokenlens_classified_total"
    assert value(samples, classified, task_class="extraction", decided_by="rules") == 4
    assert value(samples, classified, task_class="summarization", decided_by="header") == 1
    assert value(samples, classified, task_class="default", decided_by="header") == 1
    # Tokens and dollars agree with the dashboard's own counters.
    tokens = "tokenlens_prompt_tokens_total"
    assert value(samples, tokens, stage="original") == stats.tokens_original > 0
    assert value(samples, tokens, stage="compressed") == stats.tokens_compressed
    assert stats.tokens_compressed < stats.tokens_original
    saved = stats.tokens_original - stats.tokens_compressed
    dollars = value(samples, "tokenlens_dollars_saved_total")
    assert math.isclose(dollars, saved * 1.00 / 1_000_000)  # haiku-4-5: $1 / MTok input
    assert math.isclose(dollars, stats.dollars_saved)
    # Histograms: one compression per classified request, one upstream call per request.
    compressions = value(samples, "tokenlens_compression_seconds_count")
    assert compressions == 6
    assert value(samples, "tokenlens_upstream_seconds_count") == 9
    assert value(samples, "tokenlens_upstream_seconds_bucket", le="+Inf") == 9
    # The policy in force.
    assert value(samples, "tokenlens_policy_info", calibration_id="cal-00000001") == 1
    loaded = value(samples, "tokenlens_policy_loaded_timestamp_seconds")
    assert proxy.state.store is not None and math.isclose(loaded, proxy.state.store.loaded_at)

    lines = [json.loads(line) for line in access.read_text().splitlines()]
    assert len(lines) == 9
    assert secret not in access.read_text() and KEY not in access.read_text()
    extraction = [line for line in lines if line["class"] == "extraction"]
    assert [line["outcome"] for line in extraction] == ["applied"] * 4
    assert {line["status"] for line in extraction} == {200, 500}
    first = extraction[0]
    assert first["arm"] == "prune@0.5" and first["decided_by"] == "rules"
    assert first["tokens_original"] > first["tokens_compressed"] > 0
    assert first["compress_ms"] > 0 and first["upstream_ms"] > 0
    assert first["duration_ms"] >= first["upstream_ms"]
    assert first["time"].endswith("Z") and first["route"] == "messages"
    assert sorted(line["route"] for line in lines).count("other") == 1


def test_upstream_errors_and_fail_opens_are_counted(
    start_proxy: StartProxy, policy_file: Path
) -> None:
    def crash(body: dict[str, Any], arm: Arm) -> Any:
        raise RuntimeError("codec broke")

    dead = f"http://127.0.0.1:{free_port()}"
    proxy = start_proxy(ProxySettings(upstream=dead, policy_path=policy_file), compressor=crash)
    response = httpx.post(f"{proxy.base_url}/v1/messages", json=messages_body(), headers=HEADERS)
    assert response.status_code == 502
    _, samples = scrape(proxy)
    # The codec failed (fail-open), then the upstream was unreachable: the last word wins.
    assert value(samples, "tokenlens_requests_total", outcome="upstream_error", status="502") == 1
    reasons = "tokenlens_outcome_reasons_total"
    assert value(samples, reasons, outcome="upstream_error") == 1
    assert proxy.state.stats.fail_opens["error:RuntimeError"] == 1


def test_fail_open_outcome_reaches_metrics(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    def crash(body: dict[str, Any], arm: Arm) -> Any:
        raise RuntimeError("codec broke")

    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file), compressor=crash
    )
    httpx.post(f"{proxy.base_url}/v1/messages", json=messages_body(), headers=HEADERS)
    _, samples = scrape(proxy)
    assert value(samples, "tokenlens_requests_total", outcome="fail_open", status="200") == 1
    assert value(samples, "tokenlens_outcome_reasons_total", reason="error:RuntimeError") == 1


def test_shadow_retention_and_policy_reload_failures(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path, sdk_for: SdkFor
) -> None:
    judge = ScriptedJudge(80.0, 60.0, "shorter")
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            judge=True,
            judge_sample=1.0,
            reload_interval_s=0.05,
        ),
        judge_factory=lambda headers: judge,
    )
    sdk = sdk_for(proxy)
    for _ in range(2):
        sdk.messages.create(**messages_body())
    proxy.wait_idle()
    _wait_for(lambda: value(scrape(proxy)[1], "tokenlens_shadow_window_pairs") == 2)
    _, samples = scrape(proxy)
    assert value(samples, "tokenlens_shadow_retention", task_class="extraction") == 0.75
    assert value(samples, "tokenlens_shadow_window_retention_sum", task_class="extraction") == 1.5
    assert value(samples, "tokenlens_shadow_judgements_total", result="judged") == 2

    # A corrupt policy is rejected, counted, and the last good one stays in force.
    atomic_write_text(policy_file, "{ not json")  # atomically: a poll never sees half of it
    _wait_for(
        lambda: (
            value(scrape(proxy)[1], "tokenlens_policy_reload_failures_total", reason="invalid") == 1
        )
    )
    _, samples = scrape(proxy)
    assert value(samples, "tokenlens_policy_info", calibration_id="cal-00000001") == 1
    assert value(samples, "tokenlens_policy_polls_total", result="unchanged") >= 1
    # A good one is picked up: the info metric moves to the new calibration.
    write_policy(standard_policy("cal-00000002"), policy_file.parent)
    _wait_for(
        lambda: value(scrape(proxy)[1], "tokenlens_policy_info", calibration_id="cal-00000002") == 1
    )
    _, samples = scrape(proxy)
    assert value(samples, "tokenlens_policy_info", calibration_id="cal-00000001") == 0
    assert value(samples, "tokenlens_policy_polls_total", result="reloaded") == 1
    # The new policy starts a new watch: the window is empty again.
    assert value(samples, "tokenlens_shadow_window_pairs", task_class="extraction") == 0
    assert math.isnan(value(samples, "tokenlens_shadow_retention", task_class="extraction"))


def test_fleet_view_of_one_process_matches_its_dashboard(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path, sdk_for: SdkFor
) -> None:
    """The multi-worker feed is built from metrics; on one process it must equal the
    dashboard's own counters, figure by figure."""
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file, measure=True)
    )
    sdk = sdk_for(proxy)
    for question in ("Who manages region 7?", "Summarize the filing.", "Who manages region 9?"):
        sdk.messages.create(**messages_body(question))
    httpx.post(f"{proxy.base_url}/v1/messages", content=b"{nope", headers=HEADERS)
    proxy.wait_idle()
    state = proxy.state
    local = build_feed(state)
    state.observer.metrics.sync(state.stats)
    fleet = fleet_feed(build_feed(state), state.observer.metrics.families())
    for key in ("requests", "requests_total", "passthrough", "fail_opens", "upstream_status"):
        assert fleet[key] == local[key], key
    for key in ("tokens_original", "tokens_compressed", "tokens_saved", "reduction"):
        assert fleet["savings"][key] == local["savings"][key], key
    assert math.isclose(fleet["savings"]["dollars_saved"], local["savings"]["dollars_saved"])
    for key in ("requests", "failures", "tokens_original", "tokens_compressed"):
        assert fleet["measured"][key] == local["measured"][key], key
    assert local["measured"]["requests"] >= 2
    assert fleet["cache"] == local["cache"]
    for mine, theirs in zip(fleet["classes"], local["classes"], strict=True):
        for key in ("requests", "compressed", "tokens_saved", "live_n", "judged"):
            assert mine[key] == theirs[key], (mine["task_class"], key)
    assert fleet["fleet"]["workers"] == 1
    assert fleet["fleet"]["calibrations_in_force"] == {"cal-00000001": 1}


def test_an_upstream_that_breaks_off_mid_stream_is_an_upstream_error(
    start_proxy: StartProxy,
) -> None:
    """Counted as what it is whatever the client saw (a cut stream or an aborted one)."""

    async def broken(request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            yield b"event: message_start\ndata: {}\n\n"
            await asyncio.sleep(0.05)
            raise RuntimeError("upstream died mid-answer")

        return StreamingResponse(events(), media_type="text/event-stream")

    upstream = ThreadServer(Starlette(routes=[Route("/v1/messages", broken, methods=["POST"])]))
    upstream.start()
    try:
        proxy = start_proxy(ProxySettings(upstream=upstream.base_url))
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.stream(
                "POST", f"{proxy.base_url}/v1/messages", json=messages_body(), headers=HEADERS
            ) as response,
        ):
            for _ in response.iter_bytes():
                pass
        _wait_for(lambda: value(scrape(proxy)[1], "tokenlens_requests_total") == 1)
        _, samples = scrape(proxy)
        assert value(samples, "tokenlens_requests_total", outcome="upstream_error") == 1
        reasons = [
            dict(labels)["reason"]
            for (name, labels), n in samples.items()
            if name == "tokenlens_outcome_reasons_total" and n
        ]
        assert len(reasons) == 1 and reasons[0].startswith("stream:"), reasons
    finally:
        upstream.stop()

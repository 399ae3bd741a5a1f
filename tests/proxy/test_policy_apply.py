"""The policy applied per request over real HTTP: classes, header, reload, fail-open."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx

from tokenlens.compress import compress_request
from tokenlens.compress.arms import Arm
from tokenlens.errors import CompressionError
from tokenlens.policy import write_policy
from tokenlens.proxy.settings import ProxySettings
from tokenlens.testing import FakeAnthropic

from .conftest import (
    KEY,
    ProxyServer,
    RecordingUpstream,
    ThreadServer,
    entry,
    make_policy,
    messages_body,
    standard_policy,
)

StartProxy = Callable[..., ProxyServer]
PRUNE = Arm("prune", 0.5)
SAFE = Arm("safe")
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


def _post(proxy: ProxyServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(
        f"{proxy.base_url}/v1/messages", json=body, headers={**HEADERS, **headers}, timeout=30
    )


def _sent(fake: FakeAnthropic) -> dict[str, Any]:
    body: dict[str, Any] = fake.calls("/v1/messages")[-1].body
    return body


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def test_each_class_gets_its_arm_through_the_shared_compress_request(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file))
    cases = [
        # (question, header, class, arm the upstream must have received)
        ("Who manages region 7?", None, "extraction", PRUNE),  # ✓ measured
        ("Summarize the report in two sentences.", None, "summarization", SAFE),  # ? not allowed
        ("Who manages region 7?", "code-context", "code-context", SAFE),  # — none: safe only
        ("Who manages region 7?", "summarization", "summarization", SAFE),  # header wins
        ("Summarize the report.", "extraction", "extraction", PRUNE),  # header wins
        ("Hello there, how are you", None, "default", SAFE),  # nothing matched: default
    ]
    for question, header, task_class, arm in cases:
        body = messages_body(question)
        extra = {"x-tokenlens-class": header} if header else {}
        response = _post(proxy, body, **extra)
        assert response.status_code == 200
        assert response.headers["x-tokenlens-class"] == task_class
        assert _sent(fake_anthropic) == compress_request(body, arm).body, (question, header)
    feed = proxy.feed()
    rows = {row["task_class"]: row for row in feed["classes"]}
    assert (
        rows["extraction"]["compressed"] == 2 and rows["extraction"]["arm_in_force"] == "prune@0.5"
    )
    assert rows["summarization"]["arm_in_force"] == "safe"
    assert feed["savings"]["tokens_saved"] > 0 and feed["savings"]["dollars_saved"] > 0


def test_allow_provisional_applies_question_mark_entries(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url, policy_path=policy_file, allow_provisional=True
        )
    )
    body = messages_body("Summarize the report in two sentences.")
    _post(proxy, body)
    assert _sent(fake_anthropic) == compress_request(body, PRUNE).body


def test_compress_override_without_a_policy(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy
) -> None:
    arm = Arm("select", 0.5)
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, override_arm=arm))
    body = messages_body()
    client = anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)
    message = client.messages.create(**body)
    assert message.content[0].type == "text"
    assert _sent(fake_anthropic) == compress_request(body, arm).body


def test_streaming_request_is_compressed_and_streamed(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file))
    body = messages_body()
    client = anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)
    with client.messages.stream(**body) as stream:
        text = "".join(stream.text_stream)
    assert text.strip()
    assert _sent(fake_anthropic) == compress_request({**body, "stream": True}, PRUNE).body


def test_hot_reload_and_invalid_policy_rejection(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url, policy_path=policy_file, reload_interval_s=0.05
        )
    )
    body = messages_body()
    _post(proxy, body)
    assert _sent(fake_anthropic) == compress_request(body, PRUNE).body
    # Publish a new policy: extraction now gets minify.
    new = make_policy({"extraction": entry("extraction", "measured", "minify")}, cid="cal-11111111")
    write_policy(new, policy_file.parent)
    _wait_for(lambda: proxy.feed()["policy"]["calibration_id"] == "cal-11111111")
    _post(proxy, body)
    assert _sent(fake_anthropic) == compress_request(body, Arm("minify")).body
    # A broken file is rejected; the last good policy stays in force. Written whole and
    # renamed into place, as a publisher does: the poller must not see it half-written.
    staged = policy_file.with_name("broken.tmp")
    staged.write_text('{"schema_version": 1, "calibration_id": "x"')
    os.replace(staged, policy_file)
    _wait_for(lambda: proxy.feed()["policy"]["rejections"] == 1)
    feed = proxy.feed()
    assert feed["policy"]["calibration_id"] == "cal-11111111"
    assert "not valid JSON" in feed["policy"]["last_error"]
    _post(proxy, body)
    assert _sent(fake_anthropic) == compress_request(body, Arm("minify")).body


def _crash(body: dict[str, Any], arm: Arm) -> Any:
    raise CompressionError("injected codec crash")


def test_fail_open_under_a_codec_crash_answers_every_request(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file),
        compressor=_crash,
    )
    client = anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)
    body = messages_body()
    n = 40

    def call(i: int) -> str:
        if i % 2:
            with client.messages.stream(**body) as stream:
                return "".join(stream.text_stream)
        return client.messages.create(**body).content[0].text  # type: ignore[union-attr]

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(call, range(n)))
    assert len(answers) == n and all(answer.strip() for answer in answers)
    sent = [call.body for call in fake_anthropic.calls("/v1/messages")]
    assert len(sent) == n
    assert all({k: v for k, v in s.items() if k != "stream"} == body for s in sent)
    feed = proxy.feed()
    assert feed["fail_opens"] == {"error:CompressionError": n}
    assert feed["upstream_status"] == {"2xx": n}


def test_fail_open_when_compression_is_slower_than_the_budget(
    recording_upstream: tuple[RecordingUpstream, ThreadServer],
    start_proxy: StartProxy,
    policy_file: Path,
) -> None:
    recorder, upstream = recording_upstream
    release = threading.Event()

    def slow(body: dict[str, Any], arm: Arm) -> Any:
        if body["model"] != "warm-up":  # the start-up warm-up goes through at once
            release.wait(5)
        return compress_request(body, arm)

    proxy = start_proxy(
        ProxySettings(upstream=upstream.base_url, policy_path=policy_file, compress_budget_ms=100),
        compressor=slow,
    )
    raw = json.dumps(messages_body()).encode()
    response = httpx.post(f"{proxy.base_url}/v1/messages", content=raw, headers=HEADERS)
    release.set()
    assert response.status_code == 200
    assert recorder.seen[-1].body == raw  # the original bytes, untouched
    assert proxy.feed()["fail_opens"] == {"budget": 1}


def test_upstream_rejecting_a_compressed_body_gets_the_original(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file))
    fake_anthropic.inject("400", 1)
    body = messages_body()
    response = _post(proxy, body)
    assert response.status_code == 200
    first, second = (call.body for call in fake_anthropic.calls("/v1/messages"))
    assert first == compress_request(body, PRUNE).body and second == body
    assert proxy.feed()["fail_opens"] == {"upstream_rejected": 1}


def test_bodies_over_the_size_limit_pass_through_uncompressed(
    recording_upstream: tuple[RecordingUpstream, ThreadServer],
    start_proxy: StartProxy,
    policy_file: Path,
) -> None:
    recorder, upstream = recording_upstream
    proxy = start_proxy(
        ProxySettings(upstream=upstream.base_url, policy_path=policy_file, max_body_bytes=2_000)
    )
    big = json.dumps(messages_body()).encode()
    small = json.dumps(
        messages_body() | {"messages": [{"role": "user", "content": "Hi?"}]}
    ).encode()
    assert len(big) > 2_000 > len(small)
    httpx.post(f"{proxy.base_url}/v1/messages", content=big, headers=HEADERS)
    assert recorder.seen[-1].body == big
    feed = proxy.feed()
    assert feed["passthrough"] == {"too_large": 1}
    httpx.post(f"{proxy.base_url}/v1/messages", content=small, headers=HEADERS)
    assert proxy.feed()["passthrough"] == {"too_large": 1, "no_gain": 1}


def test_non_json_bodies_are_forwarded_for_the_upstream_to_judge(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file))
    response = httpx.post(f"{proxy.base_url}/v1/messages", content=b"{not json", headers=HEADERS)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert proxy.feed()["passthrough"] == {"not_json": 1}


def test_policy_in_force_survives_a_standard_policy_round_trip(policy_file: Path) -> None:
    assert json.loads(policy_file.read_text())["calibration_id"] == (
        standard_policy().calibration_id
    )

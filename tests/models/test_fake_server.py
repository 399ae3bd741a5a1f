"""The loopback server itself: recording, redaction, faults, seeding, raw SSE."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tokenlens.testing import FakeAnthropic
from tokenlens.testing.workers import wait_for

HEADERS = {"x-api-key": "sk-secret-value", "anthropic-version": "2023-06-01"}
BODY = {
    "model": "claude-haiku-4-5",
    "max_tokens": 200,
    "messages": [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Invoice 4417 was paid by Alice on March 3. The cafeteria opens at "
                    "noon. Alice also approved invoice 4418 on March 5. Bob paid invoice "
                    "4419 late.",
                },
                {"type": "text", "text": "Which invoices did Alice handle?"},
            ],
        }
    ],
}


_HTTP = httpx.Client(timeout=10)  # one client: building an SSL context per call costs ~50 ms


def post(server: FakeAnthropic, path: str, body: object) -> httpx.Response:
    return _HTTP.post(server.base_url + path, json=body, headers=HEADERS)


def test_requests_are_recorded_with_keys_redacted_and_query_kept(
    fake_anthropic: FakeAnthropic,
) -> None:
    response = post(fake_anthropic, "/v1/messages/count_tokens?beta=true", BODY)
    assert response.status_code == 200 and response.json()["input_tokens"] > 10
    [call] = fake_anthropic.requests
    assert (call.method, call.path, call.query, call.status) == (
        "POST",
        "/v1/messages/count_tokens",
        "beta=true",
        200,
    )
    assert call.headers["x-api-key"] == "<redacted>"
    assert "sk-secret-value" not in json.dumps(call.headers)
    assert call.body == BODY


def test_missing_key_and_bad_body_are_rejected_like_the_api(
    fake_anthropic: FakeAnthropic,
) -> None:
    no_key = _HTTP.post(fake_anthropic.base_url + "/v1/messages", json=BODY)
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "authentication_error"
    bad = post(fake_anthropic, "/v1/messages", {k: v for k, v in BODY.items() if k != "max_tokens"})
    assert bad.status_code == 400 and "max_tokens" in bad.json()["error"]["message"]
    assert [r.status for r in fake_anthropic.requests] == [401, 400]


def test_same_request_can_answer_differently_and_reset_replays(
    fake_anthropic: FakeAnthropic,
) -> None:
    def answers() -> list[str]:
        return [
            post(fake_anthropic, "/v1/messages", BODY).json()["content"][0]["text"]
            for _ in range(12)
        ]

    first = answers()
    assert len(set(first)) > 1  # temperature 1.0 (the default): samples differ
    fake_anthropic.reset()
    assert answers() == first  # seeded by (seed, request, occurrence): reproducible


def test_greedy_requests_repeat(fake_anthropic: FakeAnthropic) -> None:
    greedy = {**BODY, "temperature": 0.0}
    texts = {
        post(fake_anthropic, "/v1/messages", greedy).json()["content"][0]["text"] for _ in range(5)
    }
    assert len(texts) == 1


def test_429_carries_retry_after_and_an_api_error_body(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.inject("429", retry_after=2)
    response = post(fake_anthropic, "/v1/messages", BODY)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json() == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "injected 429"},
    }
    assert post(fake_anthropic, "/v1/messages", BODY).status_code == 200  # times=1 consumed


def test_unknown_fault_and_bad_settings_are_refused(fake_anthropic: FakeAnthropic) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        fake_anthropic.inject("418")
    with pytest.raises(ValueError, match="bad random faults"):
        fake_anthropic.set_fault_rate(1.5)
    with pytest.raises(ValueError, match="unknown settings"):
        fake_anthropic.configure(speed=3)


def test_sse_events_arrive_one_by_one_in_order(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.configure(stream_delay_s=0.1)
    arrivals: list[tuple[str, float]] = []
    started = time.monotonic()
    with _HTTP.stream(
        "POST",
        fake_anthropic.base_url + "/v1/messages",
        json={**BODY, "stream": True},
        headers=HEADERS,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                arrivals.append((line.removeprefix("event: "), time.monotonic() - started))
    names = [name for name, _ in arrivals]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    # Not buffered: the first event arrived well before the last one was sent.
    assert arrivals[-1][1] - arrivals[0][1] >= 0.1 * (len(arrivals) - 2)


def test_random_faults_are_seeded(fake_anthropic: FakeAnthropic) -> None:
    def statuses() -> list[int]:
        fake_anthropic.reset()
        fake_anthropic.set_fault_rate(0.3, kinds=("529",), seed=5)
        return [post(fake_anthropic, "/v1/messages", BODY).status_code for _ in range(20)]

    first = statuses()
    assert first == statuses()
    assert set(first) == {200, 529}


def test_a_fresh_server_can_start_with_random_faults() -> None:
    with FakeAnthropic(fault_rate=1.0, fault_kinds=("500",)) as server:
        assert server.fault_rate == 1.0
        assert post(server, "/v1/messages", BODY).status_code == 500
        server.reset()  # reset clears random faults too
        assert post(server, "/v1/messages", BODY).status_code == 200
    assert server.fault_rate == 0.0


def test_a_held_request_is_counted_while_it_is_held(fake_anthropic: FakeAnthropic) -> None:
    """A stalled request is recorded only when it ends; `held()` shows it while it waits
    (a test that kills a stuck client waits on this, not on the stall's full length)."""
    fake_anthropic.configure(stall_s=30.0)
    fake_anthropic.inject("stall")
    assert fake_anthropic.held() == 0
    started = time.monotonic()
    with httpx.Client(timeout=0.5) as client, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            client.post, fake_anthropic.base_url + "/v1/messages", json=BODY, headers=HEADERS
        )
        wait_for(lambda: fake_anthropic.held() >= 1, 5, "the request to be held", every=0.01)
        assert fake_anthropic.calls() == []  # not recorded while held
        with pytest.raises(httpx.ReadTimeout):
            pending.result()
    # the client gave up: the hold ends with it
    wait_for(lambda: fake_anthropic.held() == 0, 5, "the hold to end with its client", every=0.01)
    assert [c.fault for c in fake_anthropic.calls()] == ["stall"]
    assert time.monotonic() - started < 10


def test_latency_counts_from_arrival_not_from_when_the_answer_is_made(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote API's latency does not grow with the fake's own CPU: the answer is made
    during the wait, so a bench charges the client no more than `latency_s` a call."""
    making = fake_anthropic._message

    def slow_to_make(*args: object, **kwargs: object) -> object:
        time.sleep(0.5)  # a slow judge grading, say; blocks the server's loop like CPU does
        return making(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fake_anthropic, "_message", slow_to_make)
    fake_anthropic.configure(latency_s=0.6)
    assert post(fake_anthropic, "/v1/messages", BODY).status_code == 200
    [call] = fake_anthropic.calls()
    assert call.received is not None
    held = call.timestamp - call.received
    # The stamps are wall-clock times and the wait runs on the monotonic clock; the wall
    # clock may be slewed (by NTP, up to 500 ppm): 0.6 s can read 0.5997 s.
    assert 0.6 * (1 - 5e-4) <= held < 1.0  # made beside the wait; made after it, 1.1 s or more

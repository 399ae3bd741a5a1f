"""The loopback server itself: recording, redaction, faults, seeding, raw SSE."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

from tokenlens.testing import FakeAnthropic
from tokenlens.testing import fake_anthropic as fake_module
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


def test_sse_events_arrive_one_by_one_in_order(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not buffered: the client reads the first event while the fake still holds back the
    rest (a fake that buffered the stream would never send it, and the read would time out)."""
    first_read = threading.Event()
    fake_anthropic.hold_streams(first_read)
    fake_anthropic.configure(stream_delay_s=0.01)
    names: list[str] = []
    with _HTTP.stream(
        "POST",
        fake_anthropic.base_url + "/v1/messages",
        json={**BODY, "stream": True},
        headers=HEADERS,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                names.append(line.removeprefix("event: "))
                first_read.set()
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}


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
    fake_anthropic.configure(stall_s=600.0)  # the guards below trip long before
    fake_anthropic.inject("stall")
    assert fake_anthropic.held() == 0
    port = int(fake_anthropic.base_url.rsplit(":", 1)[1])
    body = json.dumps(BODY).encode()
    head = "".join(f"{name}: {value}\r\n" for name, value in HEADERS.items())
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + head.encode()
            + b"content-length: %d\r\n\r\n" % len(body)
            + body
        )
        wait_for(lambda: fake_anthropic.held() >= 1, 60, "the request to be held", every=0.01)
        assert fake_anthropic.calls() == []  # not recorded while held
    # the client gave up (closed its connection): the hold ends with it
    wait_for(lambda: fake_anthropic.held() == 0, 60, "the hold to end with its client", every=0.01)
    assert [c.fault for c in fake_anthropic.calls()] == ["stall"]


def test_latency_counts_from_arrival_not_from_when_the_answer_is_made(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote API's latency does not grow with the fake's own CPU: the answer is made
    during the wait, so a bench charges the client no more than `latency_s` a call.

    Checked on the fake's own clock, which the test moves instead of reading the wall
    clock: making the answer takes 0.5 s of it, so a 0.6 s latency leaves a 0.1 s wait
    (counted from when the answer was made, the wait would be the whole 0.6 s)."""
    now = [1000.0]
    waits: list[float] = []
    monkeypatch.setattr(
        fake_module, "time", SimpleNamespace(monotonic=lambda: now[0], time=time.time)
    )

    class Clocked:  # the fake's asyncio, with its sleeps recorded and not slept
        def __getattr__(self, name: str) -> object:
            return getattr(asyncio, name)

        @staticmethod
        async def sleep(delay: float) -> None:
            waits.append(delay)
            await asyncio.sleep(0)

    monkeypatch.setattr(fake_module, "asyncio", Clocked())
    making = fake_anthropic._message

    def slow_to_make(*args: object, **kwargs: object) -> object:
        now[0] += 0.5  # a slow judge grading, say: the fake's clock moves on meanwhile
        return making(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fake_anthropic, "_message", slow_to_make)
    fake_anthropic.configure(latency_s=0.6)
    assert post(fake_anthropic, "/v1/messages", BODY).status_code == 200
    assert waits == [pytest.approx(0.1)]
    [call] = fake_anthropic.calls()
    assert call.status == 200

"""Pass-through over real HTTP: the official SDK, through the proxy, to the loopback server."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anthropic
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tokenlens.proxy.settings import ProxySettings
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, MODEL, ProxyServer, RecordingUpstream, ThreadServer, free_port

StartProxy = Callable[..., ProxyServer]


def _sdk(base_url: str, **kwargs: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=base_url, max_retries=0, **kwargs)


def _request() -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 300,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "The launch moved to 14 March. Budget is 40k."},
                    {"type": "text", "text": "When is the launch?"},
                ],
            }
        ],
    }


def _comparable(message: anthropic.types.Message) -> dict[str, Any]:
    data = message.model_dump()
    data.pop("id")  # the fake mints a fresh id per response
    return data


def test_sdk_plain_and_streaming_match_direct(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy
) -> None:
    """Same request, same server state: the SDK sees the same result either way.

    The fake samples by (request, how often it has seen it), so its history is reset
    before each side to make the two calls comparable.
    """
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url))
    direct, via = _sdk(fake_anthropic.base_url), _sdk(proxy.base_url)

    def plain(client: anthropic.Anthropic) -> dict[str, Any]:
        fake_anthropic.reset()
        return _comparable(client.messages.create(**_request()))

    def stream(client: anthropic.Anthropic) -> tuple[list[str], list[str], dict[str, Any]]:
        fake_anthropic.reset()
        with client.messages.stream(**_request()) as events:
            kinds = [event.type for event in events]
            final = _comparable(events.get_final_message())
        fake_anthropic.reset()
        with client.messages.stream(**_request()) as events:
            text = list(events.text_stream)
        return kinds, text, final

    assert plain(via) == plain(direct)
    assert stream(via) == stream(direct)
    kinds, text, _ = stream(via)
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and len(text) > 1
    count = {"model": MODEL, "messages": _request()["messages"]}
    assert via.messages.count_tokens(**count) == direct.messages.count_tokens(**count)
    assert proxy.feed()["requests"] == {"messages": 5, "count_tokens": 1}
    # The key crossed: the fake answers 401 to a request without one.
    assert all(call.status == 200 for call in fake_anthropic.requests)


def test_without_a_policy_upstream_receives_the_exact_bytes_headers_and_query(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    recorder, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url))
    raw = json.dumps(_request(), indent=3).encode() + b"\n  "  # odd spacing must survive
    headers = {
        "x-api-key": KEY,
        "authorization": "Bearer tok-123",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "prompt-caching-2024-07-31,output-128k-2025-02-19",
        "content-type": "application/json",
        "x-tokenlens-class": "extraction",
    }
    response = httpx.post(f"{proxy.base_url}/v1/messages?beta=true", content=raw, headers=headers)
    assert response.status_code == 200 and response.json()["content"][0]["text"] == "recorded"
    assert response.headers["request-id"] == "req_rec"
    (seen,) = recorder.seen
    assert seen.body == raw
    assert seen.query == "beta=true"
    for name in ("x-api-key", "authorization", "anthropic-version", "anthropic-beta"):
        assert seen.headers[name] == headers[name]
    assert "x-tokenlens-class" not in seen.headers  # our control header stays with us
    assert seen.headers["content-length"] == str(len(raw))


def test_sdk_beta_namespace_query_string_and_other_paths_pass_through(
    recording_upstream: tuple[RecordingUpstream, ThreadServer], start_proxy: StartProxy
) -> None:
    recorder, upstream = recording_upstream
    proxy = start_proxy(ProxySettings(upstream=upstream.base_url))
    client = _sdk(proxy.base_url)
    # SDK 2.x no longer appends `?beta=true` itself (older SDKs did): send it explicitly.
    client.beta.messages.create(
        **_request(), betas=["context-1m-2025-08-07"], extra_query={"beta": "true"}
    )
    assert recorder.seen[-1].query == "beta=true"
    assert recorder.seen[-1].headers["anthropic-beta"] == "context-1m-2025-08-07"
    # Any other path and method is forwarded as is, body and all.
    got = httpx.get(f"{proxy.base_url}/v1/models?limit=3", headers={"x-api-key": KEY})
    assert got.json() == {"path": "/v1/models"} and got.headers["x-upstream"] == "yes"
    assert (recorder.seen[-1].method, recorder.seen[-1].query) == ("GET", "limit=3")
    httpx.delete(f"{proxy.base_url}/v1/files/file_1", headers={"x-api-key": KEY})
    assert (recorder.seen[-1].method, recorder.seen[-1].path) == ("DELETE", "/v1/files/file_1")
    payload = b"x" * 100_000
    httpx.post(f"{proxy.base_url}/v1/messages/batches", content=payload)
    assert recorder.seen[-1].body == payload


@pytest.mark.parametrize(
    ("fault", "status", "error"),
    [
        ("429", 429, anthropic.RateLimitError),
        ("529", 529, anthropic.InternalServerError),
        ("500", 500, anthropic.InternalServerError),
        ("400", 400, anthropic.BadRequestError),
    ],
)
def test_upstream_errors_come_back_with_status_body_and_retry_after(
    fake_anthropic: FakeAnthropic,
    start_proxy: StartProxy,
    fault: str,
    status: int,
    error: type[anthropic.APIStatusError],
) -> None:
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url))
    fake_anthropic.inject(fault, 1, retry_after=7)
    with pytest.raises(error) as caught:
        _sdk(proxy.base_url).messages.create(**_request())
    assert caught.value.status_code == status
    assert caught.value.body == {
        "type": "error",
        "error": {"type": caught.value.body["error"]["type"], "message": f"injected {fault}"},
    }
    if status == 429:
        assert caught.value.response.headers["retry-after"] == "7"


def test_unreachable_upstream_is_an_anthropic_shaped_502(start_proxy: StartProxy) -> None:
    proxy = start_proxy(ProxySettings(upstream=f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        _sdk(proxy.base_url).messages.create(**_request())
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"
    assert proxy.feed()["upstream_unreachable"] == 1


def test_sse_is_relayed_event_by_event_not_buffered(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy
) -> None:
    """Each upstream event reaches the client on its own: the client reads the first one
    while the upstream still holds back the rest (a buffering relay would wait forever,
    and the client's read time out)."""
    first_read = threading.Event()
    fake_anthropic.hold_streams(first_read)
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url))
    names: list[str] = []
    with httpx.stream(
        "POST",
        f"{proxy.base_url}/v1/messages",
        json={**_request(), "stream": True},
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        timeout=60,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event:"):
                names.append(line.removeprefix("event:").strip())
                first_read.set()
    assert len(names) >= 6
    assert (names[0], names[-1]) == ("message_start", "message_stop")


def test_client_leaving_mid_stream_stops_the_upstream_answer(start_proxy: StartProxy) -> None:
    """The relay aborts the upstream exchange when its client goes away, so a generating
    upstream is not left streaming (and billing) an answer nobody reads."""
    total = 60
    sent: list[int] = []
    stopped = threading.Event()

    async def slow_stream(request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            try:
                for i in range(total):
                    sent.append(i)
                    yield f'event: ping\ndata: {{"i": {i}}}\n\n'.encode()
                    await asyncio.sleep(0.05)
            finally:
                stopped.set()

        return StreamingResponse(events(), media_type="text/event-stream")

    upstream = ThreadServer(
        Starlette(routes=[Route("/v1/messages", slow_stream, methods=["POST"])])
    )
    upstream.start()
    try:
        proxy = start_proxy(ProxySettings(upstream=upstream.base_url))
        with (
            httpx.Client(timeout=10) as client,
            client.stream(
                "POST", f"{proxy.base_url}/v1/messages", json={**_request(), "stream": True}
            ) as response,
        ):
            first = next(response.iter_raw())
            assert b"event: ping" in first
            # leaving the block before the end closes this connection
        assert stopped.wait(timeout=10), "the upstream kept streaming after the client left"
        assert len(sent) < total
        proxy.wait_idle()
        assert proxy.feed()["client_gone"] == 1
        # the proxy still serves the next client
        answer = httpx.post(
            f"{proxy.base_url}/v1/messages", json={**_request(), "stream": True}, timeout=30
        )
        assert answer.status_code == 200 and answer.text.count("event: ping") == total
    finally:
        upstream.stop()

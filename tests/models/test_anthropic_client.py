"""The Anthropic client through the official SDK, against the loopback server."""

from __future__ import annotations

import logging

import anthropic
import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.base import CompletionRequest, Message
from tokenlens.models.retry import InvalidOutputError, RetryPolicy, TruncatedOutputError
from tokenlens.pricing import cost_usd
from tokenlens.tasks import CalibrationTask
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.workers import wait_for

TASK = CalibrationTask(
    id="t1",
    task_class="extraction",
    question="Who paid invoice 4417, and when?",
    context=(
        "The Lisbon office opened in 2019. Invoice 4417 was paid by Alice on March 3. "
        "The cafeteria serves lunch from noon."
    ),
    reference="Alice paid invoice 4417 on March 3.",
)
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "grade_a": {"type": "integer", "minimum": 0, "maximum": 100},
        "grade_b": {"type": "integer", "minimum": 0, "maximum": 100},
        "note": {"type": "string"},
    },
    "required": ["reasoning", "grade_a", "grade_b", "note"],
    "additionalProperties": False,
}


def answer_request(**overrides: object) -> CompletionRequest:
    return CompletionRequest.from_body(TASK.to_request(model="claude-haiku-4-5"), **overrides)


def judge_request() -> CompletionRequest:
    prompt = (
        f"<request>{TASK.question}</request>\n<reference>{TASK.reference}</reference>\n"
        "<answer_a>Alice paid invoice 4417 on March 3.</answer_a>\n"
        "<answer_b>The cafeteria serves lunch from noon.</answer_b>"
    )
    return CompletionRequest(
        model="claude-haiku-4-5",
        messages=(Message(role="user", content=prompt),),
        max_tokens=400,
        temperature=0.0,
        json_schema=JUDGE_SCHEMA,
    )


# --- plain, streaming, structured, count_tokens -----------------------------------------


def test_plain_completion_answers_from_the_prompt(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    completion = client.complete(answer_request(temperature=0.0))
    assert "Alice on March 3" in completion.text
    assert completion.backend == "anthropic"
    assert completion.model == "claude-haiku-4-5"
    assert completion.stop_reason == "end_turn"
    assert completion.usage.input_tokens > 20 and completion.usage.output_tokens > 3
    assert completion.latency_s > 0
    [call] = fake_anthropic.calls()
    assert call.body["messages"][-1]["content"][-1]["text"] == TASK.question
    assert call.body["temperature"] == 0.0
    assert "output_config" not in call.body


def test_sdk_retries_are_off_so_our_layer_is_the_only_one(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.inject("500", times=1)
    client.complete(answer_request())
    retry_counts = [c.headers["x-stainless-retry-count"] for c in fake_anthropic.calls()]
    assert retry_counts == ["0", "0"]  # two fresh SDK requests, no SDK-internal retry


def test_streaming_client_assembles_the_same_answer(fake_anthropic: FakeAnthropic) -> None:
    streaming = AnthropicClient(
        api_key="k", base_url=fake_anthropic.base_url, stream=True, retry=RetryPolicy(1)
    )
    plain = AnthropicClient(api_key="k", base_url=fake_anthropic.base_url, retry=RetryPolicy(1))
    request = answer_request(temperature=0.0)
    streamed = streaming.complete(request)
    assert streamed.text == plain.complete(request).text
    assert streamed.usage.output_tokens > 0
    assert [c.body.get("stream", False) for c in fake_anthropic.calls()] == [True, False]


def test_sdk_stream_sees_the_full_event_sequence(fake_anthropic: FakeAnthropic) -> None:
    sdk = anthropic.Anthropic(api_key="k", base_url=fake_anthropic.base_url, max_retries=0)
    body = TASK.to_request(model="claude-haiku-4-5")
    with sdk.messages.create(**body, stream=True) as stream:
        kinds = [event.type for event in stream]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"} and len(kinds) > 5


def test_structured_output_returns_a_validated_object(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    completion = client.complete(judge_request())
    assert completion.parsed is not None
    assert list(completion.parsed) == ["reasoning", "grade_a", "grade_b", "note"]
    assert completion.parsed["grade_a"] > completion.parsed["grade_b"]
    [call] = fake_anthropic.calls()
    fmt = call.body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    # The wire schema is the SDK's strict form; bounds moved into descriptions.
    assert "minimum" not in fmt["schema"]["properties"]["grade_a"]


def test_forced_tool_fallback_returns_the_same_object(fake_anthropic: FakeAnthropic) -> None:
    client = AnthropicClient(
        api_key="k", base_url=fake_anthropic.base_url, structured="tool", retry=RetryPolicy(1)
    )
    completion = client.complete(judge_request())
    assert completion.parsed is not None and completion.parsed["grade_a"] > 80
    assert completion.stop_reason == "tool_use"
    [call] = fake_anthropic.calls()
    assert call.body["tool_choice"] == {"type": "tool", "name": "record_response"}
    assert "output_config" not in call.body


def test_count_tokens_matches_usage(client: AnthropicClient, fake_anthropic: FakeAnthropic) -> None:
    body = TASK.to_request(model="claude-haiku-4-5")
    counted = client.count_tokens(body)
    completion = client.complete(answer_request())
    assert counted == completion.usage.input_tokens > 0
    count_call = fake_anthropic.calls("/v1/messages/count_tokens")[0]
    assert "max_tokens" not in count_call.body


def test_cost_is_computed_from_usage_and_the_pricing_table(client: AnthropicClient) -> None:
    completion = client.complete(answer_request())
    expected = (
        completion.usage.input_tokens * 1.00 + completion.usage.output_tokens * 5.00
    ) / 1_000_000  # claude-haiku-4-5: $1 / $5 per million tokens
    assert completion.cost_usd == pytest.approx(expected)
    assert completion.cost_usd == cost_usd(
        "claude-haiku-4-5",
        input_tokens=completion.usage.input_tokens,
        output_tokens=completion.usage.output_tokens,
    )


def test_unknown_model_has_no_cost_rather_than_zero(client: AnthropicClient) -> None:
    completion = client.complete(answer_request(model="claude-unknown-9"))
    assert completion.cost_usd is None


def test_cut_off_answer_is_a_failure_that_keeps_the_completion(client: AnthropicClient) -> None:
    with pytest.raises(TruncatedOutputError, match="max_tokens=2") as info:
        client.complete(answer_request(max_tokens=2))
    assert info.value.retryable is False
    assert info.value.completion.stop_reason == "max_tokens"  # type: ignore[attr-defined]


# --- faults ----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["429", "529", "500", "503"])
def test_retryable_fault_recovers(
    client: AnthropicClient, fake_anthropic: FakeAnthropic, fault: str
) -> None:
    fake_anthropic.inject(fault, times=2)
    completion = client.complete(answer_request())
    assert completion.text
    statuses = [c.status for c in fake_anthropic.calls()]
    assert statuses == [int(fault), int(fault), 200]


def test_retry_after_is_honoured(client: AnthropicClient, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.inject("429", times=1, retry_after=1)
    client.complete(answer_request())
    first, second = fake_anthropic.calls()
    assert first.status == 429 and second.status == 200
    assert second.timestamp - first.timestamp >= 0.95


def test_stalled_response_times_out_and_is_retried(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.configure(stall_s=5.0)
    client = AnthropicClient(
        api_key="k",
        base_url=fake_anthropic.base_url,
        timeout_s=0.3,
        retry=RetryPolicy(max_attempts=3, initial_wait_s=0.01, jitter_s=0.0),
    )
    fake_anthropic.inject("stall")
    completion = client.complete(answer_request())
    assert completion.text
    # the stalled request is recorded when the server sees its client gone, which can be
    # after the retry's answer (under load, even after the hold count drops): wait for the
    # hold to end and read the two calls in either order
    wait_for(lambda: fake_anthropic.held() == 0, 5, "the stalled request to end", every=0.01)
    wait_for(lambda: len(fake_anthropic.calls()) == 2, 5, "both calls recorded", every=0.01)
    assert sorted(str(c.fault) for c in fake_anthropic.calls()) == ["None", "stall"]


def test_retries_are_capped_and_the_error_says_so(
    client: AnthropicClient, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    fake_anthropic.inject("529", times=10)
    with (
        caplog.at_level(logging.WARNING, logger="tokenlens.models"),
        pytest.raises(ModelCallError, match="gave up after 4 attempts") as info,
    ):
        client.complete(answer_request())
    assert info.value.retryable and info.value.status == 529
    assert len(fake_anthropic.calls()) == 4
    retries = [r for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 3
    # Retry logs carry status and wait, never prompt content.
    assert all("4417" not in r.getMessage() and "Alice" not in r.getMessage() for r in retries)


@pytest.mark.parametrize(
    ("fault", "status", "hint"),
    [
        ("400", 400, "invalid_request_error"),
        ("401", 401, "ANTHROPIC_API_KEY"),
        ("403", 403, "permission"),
        ("404", 404, "not_found_error"),
        ("spend_limit", 429, "spend limit"),
    ],
)
def test_non_retryable_fault_fails_fast(
    client: AnthropicClient, fake_anthropic: FakeAnthropic, fault: str, status: int, hint: str
) -> None:
    fake_anthropic.inject(fault, times=5)
    with pytest.raises(ModelCallError, match=hint) as info:
        client.complete(answer_request())
    assert info.value.retryable is False
    assert info.value.status == status
    assert "not retried" in str(info.value)
    assert len(fake_anthropic.calls()) == 1


def test_connection_refused_is_retryable_and_reported(fake_anthropic: FakeAnthropic) -> None:
    dead = AnthropicClient(
        api_key="k", base_url="http://127.0.0.1:9", retry=RetryPolicy(2, initial_wait_s=0.01)
    )
    with pytest.raises(ModelCallError, match="connection error") as info:
        dead.complete(answer_request())
    assert info.value.retryable


def test_judge_reply_that_is_not_json_is_retried(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.inject("bad_json", times=1)
    completion = client.complete(judge_request())
    assert completion.parsed is not None and set(completion.parsed) >= {"grade_a", "grade_b"}
    assert [c.fault for c in fake_anthropic.calls()] == ["bad_json", None]


def test_judge_reply_never_json_surfaces_as_an_error_not_a_grade(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.inject("bad_json", times=10)
    with pytest.raises(InvalidOutputError, match="not valid JSON") as info:
        client.complete(judge_request())
    assert "gave up after 4 attempts" in str(info.value)
    assert len(fake_anthropic.calls()) == 4


def test_bad_json_fault_waits_for_a_judge_call(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.inject("bad_json")
    assert client.complete(answer_request()).text  # a plain answer is not hit
    assert client.complete(judge_request()).parsed is not None  # the judge is, and retries
    assert [c.fault for c in fake_anthropic.calls()] == [None, "bad_json", None]


def test_random_faults_at_20_percent_all_recover(fake_anthropic: FakeAnthropic) -> None:
    # The default policy's 6 attempts: 4 straight failures happen at 20% (0.2**4 per call).
    client = AnthropicClient(
        api_key="k",
        base_url=fake_anthropic.base_url,
        retry=RetryPolicy(max_attempts=6, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.01),
    )
    fake_anthropic.set_fault_rate(0.2, seed=7)
    results = [client.complete(answer_request(max_tokens=200)) for _ in range(25)]
    assert all(r.text for r in results)
    calls = fake_anthropic.calls()
    failed = [c for c in calls if c.status != 200]
    assert len(calls) == 25 + len(failed)
    assert failed and {c.status for c in failed} <= {429, 529, 500}


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelCallError, match="ANTHROPIC_API_KEY"):
        AnthropicClient()


def test_base_url_comes_from_the_environment(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    assert AnthropicClient(retry=RetryPolicy(1)).complete(answer_request()).text
    assert len(fake_anthropic.calls()) == 1

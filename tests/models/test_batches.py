"""Message Batches end to end through the SDK against the loopback server."""

from __future__ import annotations

import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.anthropic_backend import AnthropicClient
from tokenlens.models.base import Completion, CompletionRequest, Message
from tokenlens.models.batches import collect_batch, run_batch, submit_batch, wait_for_batch
from tokenlens.models.retry import InvalidOutputError
from tokenlens.pricing import cost_usd
from tokenlens.testing import FakeAnthropic

CONTEXT = "Invoice 4417 was paid by Alice on March 3. The cafeteria opens at noon."


def request(question: str, **overrides: object) -> CompletionRequest:
    fields: dict = {
        "model": "claude-haiku-4-5",
        "messages": (
            Message(
                role="user",
                content=[{"type": "text", "text": CONTEXT}, {"type": "text", "text": question}],
            ),
        ),
        "max_tokens": 200,
        "temperature": 0.0,
    }
    fields.update(overrides)
    return CompletionRequest(**fields)


ITEMS = [
    ("who-paid", request("Who paid invoice 4417?")),
    ("cafeteria", request("When does the cafeteria open?")),
    ("third", request("When was invoice 4417 paid?")),
]


def test_batch_end_to_end_at_half_price(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.configure(batch_polls=3)
    sleeps: list[float] = []
    outcomes = run_batch(client, ITEMS, poll_initial_s=0.5, poll_max_s=1.5, sleep=sleeps.append)
    assert set(outcomes) == {"who-paid", "cafeteria", "third"}
    who = outcomes["who-paid"]
    assert isinstance(who, Completion)
    assert "Alice" in who.text and "cafeteria" not in who.text
    assert "noon" in outcomes["cafeteria"].text  # type: ignore[union-attr]
    assert who.backend == "anthropic-batch"
    assert who.cost_usd == pytest.approx(
        cost_usd(
            "claude-haiku-4-5",
            input_tokens=who.usage.input_tokens,
            output_tokens=who.usage.output_tokens,
        )
        / 2
    )
    assert sleeps == [0.5, 1.0]  # backoff doubles, polled until ended on the 3rd retrieve
    paths = [(c.method, c.path.rsplit("/", 1)[-1]) for c in fake_anthropic.requests]
    assert paths[0] == ("POST", "batches")
    assert paths[-1] == ("GET", "results")
    sent = fake_anthropic.requests[0].body["requests"]
    assert [e["custom_id"] for e in sent] == ["who-paid", "cafeteria", "third"]
    assert sent[0]["params"]["temperature"] == 0.0


def test_errored_and_expired_entries_are_errors_not_answers(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.fail_batch_entry("cafeteria", "errored")
    fake_anthropic.fail_batch_entry("third", "expired")
    outcomes = run_batch(client, ITEMS, poll_initial_s=0.0, sleep=lambda _: None)
    assert isinstance(outcomes["who-paid"], Completion)
    errored, expired = outcomes["cafeteria"], outcomes["third"]
    assert isinstance(errored, ModelCallError) and "errored: api_error" in str(errored)
    assert errored.retryable  # api_error is transient: worth resubmitting
    assert isinstance(expired, ModelCallError) and "expired" in str(expired)
    assert expired.retryable


def test_structured_entries_are_validated(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    schema = {
        "type": "object",
        "properties": {"grade_a": {"type": "integer"}, "grade_b": {"type": "integer"}},
        "required": ["grade_a", "grade_b"],
        "additionalProperties": False,
    }
    judge = request(
        "<request>q</request><reference>Alice</reference>"
        "<answer_a>Alice</answer_a><answer_b>Bob</answer_b>",
        json_schema=schema,
    )
    outcomes = run_batch(client, [("judge", judge)], poll_initial_s=0.0, sleep=lambda _: None)
    result = outcomes["judge"]
    assert isinstance(result, Completion) and result.parsed is not None
    assert result.parsed["grade_a"] > result.parsed["grade_b"]


def test_steps_can_resume_from_a_batch_id(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    batch_id = submit_batch(client, ITEMS[:1])
    # ... a restart would happen here; only the id was kept ...
    batch = wait_for_batch(client, batch_id, poll_initial_s=0.0, sleep=lambda _: None)
    assert batch["processing_status"] == "ended"
    assert batch["request_counts"]["succeeded"] == 1
    outcomes = collect_batch(client, batch_id, dict(ITEMS))
    assert isinstance(outcomes["who-paid"], Completion)
    missing = outcomes["cafeteria"]  # submitted elsewhere: no result in this batch
    assert isinstance(missing, ModelCallError) and "no result" in str(missing)


def test_polling_gives_up_after_the_timeout(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.configure(batch_polls=1000)
    batch_id = submit_batch(client, ITEMS[:1])
    with pytest.raises(ModelCallError, match="still in_progress") as info:
        wait_for_batch(client, batch_id, poll_initial_s=0.05, timeout_s=0.2)
    assert info.value.retryable


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([], "at least one"),
        ([("bad id!", ITEMS[0][1])], "custom_id"),
        ([ITEMS[0], ITEMS[0]], "appears twice"),
    ],
)
def test_bad_batches_are_refused_before_any_call(
    client: AnthropicClient, fake_anthropic: FakeAnthropic, items: list, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        submit_batch(client, items)
    assert fake_anthropic.requests == []


def test_batch_submission_is_retried_on_overload(
    client: AnthropicClient, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.inject("529")
    outcomes = run_batch(client, ITEMS[:1], poll_initial_s=0.0, sleep=lambda _: None)
    assert isinstance(outcomes["who-paid"], Completion)
    creates = fake_anthropic.calls("/v1/messages/batches")
    assert [c.status for c in creates] == [529, 200]


def test_invalid_structured_entry_is_an_invalid_output_error() -> None:
    from tokenlens.models.batches import _entry_outcome

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    message = {
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": "not json"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    outcome = _entry_outcome(
        {"type": "succeeded", "message": message}, request("q", json_schema=schema)
    )
    assert isinstance(outcome, InvalidOutputError)

"""`--measure` and `--judge`: exact counts and shadow judgements, off the hot path."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx

from tokenlens.compress import compress_request
from tokenlens.compress.arms import Arm
from tokenlens.judge import PairGrade, Position
from tokenlens.proxy.settings import ProxySettings
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.fake_logic import input_tokens

from .conftest import KEY, ProxyServer, messages_body

StartProxy = Callable[..., ProxyServer]
PRUNE = Arm("prune", 0.5)


class ScriptedJudge:
    """Grades every pair (clear, comp) as told; records what it was shown."""

    name = "scripted"

    def __init__(self, grade_clear: float, grade_comp: float, note: str) -> None:
        self.grades = (grade_clear, grade_comp)
        self.note = note
        self.shown: list[dict[str, Any]] = []

    def grade_pair(self, **kwargs: Any) -> PairGrade:
        self.shown.append(kwargs)
        clear, comp = self.grades
        return PairGrade(
            judge=self.name,
            grade_clear=clear,
            grade_comp=comp,
            reasoning="scripted",
            note=self.note,
            positions=(Position(clear_is_b=False, grade_a=clear, grade_b=comp),),
        )


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def _client(proxy: ProxyServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)


def test_measure_records_exact_counts_of_both_bodies(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file, measure=True)
    )
    body = messages_body()
    _client(proxy).messages.create(**body)
    proxy.wait_idle()
    measured = proxy.feed()["measured"]
    original = input_tokens(body)
    compressed = input_tokens(compress_request(body, PRUNE).body)
    assert (measured["requests"], measured["failures"]) == (1, 0)
    assert (measured["tokens_original"], measured["tokens_compressed"]) == (original, compressed)
    assert measured["tokens_saved"] == original - compressed > 0
    counted = fake_anthropic.calls("/v1/messages/count_tokens")
    assert len(counted) == 2 and all("max_tokens" not in c.body for c in counted)


def test_measure_is_off_by_default(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    proxy = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, policy_path=policy_file))
    _client(proxy).messages.create(**messages_body())
    proxy.wait_idle()
    assert fake_anthropic.calls("/v1/messages/count_tokens") == []


def test_shadow_judge_replays_the_original_and_falls_back_below_the_bar(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    judge = ScriptedJudge(90.0, 45.0, "compressed answer drops the manager's name")
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            judge=True,
            judge_sample=1.0,
            judge_min_pairs=3,
        ),
        judge_factory=lambda headers: judge,
    )
    client = _client(proxy)
    body = messages_body()
    for i in range(3):
        if i == 1:  # a streamed answer is captured from the relayed events
            with client.messages.stream(**body) as stream:
                stream.until_done()
        else:
            client.messages.create(**body)
        # The judgement starts once the relay has finished; wait for it, then for the rest.
        _wait_for(lambda n=i + 1: len(judge.shown) == n)
        proxy.wait_idle()
    # Each judged request was replayed uncompressed and non-streaming.
    sent = [call.body for call in fake_anthropic.calls("/v1/messages")]
    compressed = compress_request(body, PRUNE).body
    assert [s == body for s in sent] == [False, True] * 3
    assert sent[2] == {**compressed, "stream": True} and sent[3] == body
    assert len(judge.shown) == 3
    shown = judge.shown[0]
    assert "Who manages region 7?" in shown["original_request_text"]
    assert shown["reference"] == shown["answer_clear"]  # live traffic: clear answer as reference
    feed = proxy.feed()
    row = next(r for r in feed["classes"] if r["task_class"] == "extraction")
    assert row["live_retention"] == 0.5 and row["live_n"] == 3
    assert "below the bar 90%" in row["fallback"]
    assert row["arm_in_force"] == "safe"
    assert feed["notes"][0]["note"] == "compressed answer drops the manager's name"
    assert feed["quality"] == {**feed["quality"], "retained": 0.5, "n": 3}
    # The class is on `safe` now, and its requests are no longer judged.
    client.messages.create(**body)
    proxy.wait_idle()
    assert fake_anthropic.calls("/v1/messages")[-1].body == compress_request(body, Arm("safe")).body
    assert len(judge.shown) == 3


def test_shadow_judge_keeps_a_class_that_holds_up(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    judge = ScriptedJudge(80.0, 88.0, "same facts")
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            judge=True,
            judge_sample=1.0,
            judge_min_pairs=2,
        ),
        judge_factory=lambda headers: judge,
    )
    for _ in range(3):
        _client(proxy).messages.create(**messages_body())
        proxy.wait_idle()
    row = next(r for r in proxy.feed()["classes"] if r["task_class"] == "extraction")
    assert row["live_retention"] == 1.0  # capped: compression earns no credit for luck
    assert row["fallback"] is None and row["arm_in_force"] == "prune@0.5"


def test_shadow_judge_with_the_real_judge_over_the_loopback_server(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    """The default judge factory: LLMJudge through the Anthropic client, the request's key."""
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            judge=True,
            judge_sample=1.0,
        )
    )
    _client(proxy).messages.create(**messages_body())
    proxy.wait_idle(timeout=30)
    feed = proxy.feed()
    row = next(r for r in feed["classes"] if r["task_class"] == "extraction")
    assert row["judged"] == 1 and row["judge_failures"] == 0, row
    assert len(feed["notes"]) == 1 and feed["notes"][0]["note"]
    assert 0.0 <= feed["notes"][0]["retention"] <= 1.0
    judge_calls = [c for c in fake_anthropic.calls("/v1/messages") if c.is_judge]
    assert len(judge_calls) == 1 and judge_calls[0].body["model"] == "claude-haiku-4-5"


def test_judge_failures_are_counted_not_graded(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path
) -> None:
    def broken(headers: dict[str, str]) -> Any:
        raise RuntimeError("judge unavailable")

    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url, policy_path=policy_file, judge=True, judge_sample=1.0
        ),
        judge_factory=broken,
    )
    _client(proxy).messages.create(**messages_body())
    proxy.wait_idle()
    row = next(r for r in proxy.feed()["classes"] if r["task_class"] == "extraction")
    assert (row["judged"], row["judge_failures"], row["live_n"]) == (0, 1, 0)


def test_uncompressed_requests_are_never_judged(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy
) -> None:
    judge = ScriptedJudge(90.0, 10.0, "x")
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, judge=True, judge_sample=1.0),
        judge_factory=lambda headers: judge,
    )
    httpx.post(
        f"{proxy.base_url}/v1/messages",
        json=messages_body(),
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    proxy.wait_idle()
    assert judge.shown == [] and len(fake_anthropic.calls("/v1/messages")) == 1

"""An agent's Messages body reaches every backend whole: its tools, tool calls and tool
results (the API refuses tool blocks without tool definitions; the local model reads them
as text; the fake model answers from the tool output)."""

from __future__ import annotations

import random
from typing import Any

import httpx

from tokenlens.facts import fact_present
from tokenlens.ledger import call_key
from tokenlens.models.anthropic_backend import request_params
from tokenlens.models.base import CompletionRequest, Message
from tokenlens.models.local import chat_messages
from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.fake_logic import fake_answer

#: A task whose question names what to look for (a file's size in a listing).
TASK = next(
    t
    for t in load_tasks(AGENT_TASKS_PATH / "agent-listing.jsonl")
    if "template:ls-size-of" in t.tags
)


def body() -> dict[str, Any]:
    return TASK.to_request(model="claude-haiku-4-5", max_tokens=200)


def test_the_tools_travel_with_the_request_and_stay_out_of_old_keys() -> None:
    request = CompletionRequest.from_body(body())
    assert request.tools is not None and [t["name"] for t in request.tools] == [
        "bash",
        "read_file",
        "grep",
    ]
    assert request_params(request, structured="output_config")["tools"] == list(request.tools)
    plain = CompletionRequest(model="m", messages=(Message(role="user", content="hi"),))
    assert "tools" not in request_params(plain, structured="output_config")
    assert call_key("c", plain) != call_key("c", plain.model_copy(update={"tools": ({},)}))


def test_the_local_model_reads_tool_calls_and_results_as_text() -> None:
    messages = chat_messages(CompletionRequest.from_body(body()))
    output = TASK.body["messages"][-1]["content"][0]["content"]  # type: ignore[index]
    assert output in messages[-1]["content"] and TASK.question in messages[-1]["content"]
    assert messages[-2]["role"] == "assistant" and "[tool call bash:" in messages[-2]["content"]


def test_the_fake_answers_from_the_tool_output() -> None:
    answer = fake_answer({**body(), "temperature": 0.0}, random.Random(0))
    output = TASK.body["messages"][-1]["content"][0]["content"]  # type: ignore[index]
    assert answer.split() and all(word in output for word in answer.split())
    assert all(fact_present(fact, answer) for fact in TASK.facts)  # the size, as listed


def test_the_fake_refuses_tool_blocks_without_tools_like_the_api(
    fake_anthropic: FakeAnthropic,
) -> None:
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    url = fake_anthropic.base_url + "/v1/messages"
    without = {k: v for k, v in body().items() if k != "tools"}
    with httpx.Client(timeout=10) as client:
        refused = client.post(url, json=without, headers=headers)
        assert refused.status_code == 400 and "must define tools" in refused.text
        assert client.post(url, json=body(), headers=headers).status_code == 200

"""Tool outputs compressed behind a cache breakpoint keep the prompt cache warm.

A recorded 20-turn agent session (real command output over aiohttp's source,
`scripts/record_agent_session.py`) is replayed through `tokenlens serve --compress-tools`
against the loopback upstream with its prompt-cache check on. The client does what a
coding agent does: a breakpoint on the system prompt and on its newest message, the older
one dropped. Each request the upstream receives must start with exactly what the proxy
sent on the turn before, and every turn after the first must read the whole earlier
prefix from the cache.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tokenlens.testing import FakeAnthropic
from tokenlens.testing.prompt_cache import PromptCache, without_breakpoints

from .conftest import KEY, free_port

#: A fail-open (the budget ran out on a loaded machine) sends one turn uncompressed and
#: costs one cache write; that is the budget's doing, not what this test is about.
BUDGET = ("--compress-budget-ms", "60000")
SESSION = Path(__file__).parent / "data" / "agent_session.json"
SYSTEM = "You are a coding agent. Use the tools; quote paths and line numbers exactly."
BASH = {
    "name": "bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def session_bodies() -> list[dict[str, Any]]:
    """The 20 request bodies the agent sends, one per turn, breakpoint on the newest block."""
    session = json.loads(SESSION.read_text(encoding="utf-8"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": session["ask"]}]
    bodies = []
    for n, turn in enumerate(session["turns"]):
        use_id = f"toolu_01Session{n:03d}Kq7xRv"  # shaped as the API's: no long digit run
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": use_id,
                        "name": "bash",
                        "input": {"command": turn["command"]},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use_id, "content": turn["output"]}
                ],
            }
        )
        sent = json.loads(json.dumps(messages))
        sent[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        bodies.append(
            {
                "model": "claude-haiku-4-5",
                "max_tokens": 16,
                "system": [
                    {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
                ],
                "tools": [BASH],
                "messages": sent,
            }
        )
    return bodies


def _canonical(value: Any) -> bytes:
    return json.dumps(
        without_breakpoints(value), ensure_ascii=False, separators=(",", ":")
    ).encode()


def _serve(upstream: str, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "tokenlens", "serve", "--upstream", upstream]
    command += ["--port", str(port), *extra]
    log = (tmp_path / "serve.log").open("ab")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, (tmp_path / "serve.log").read_text()
        try:
            httpx.get(f"{base}/tokenlens/feed.json", timeout=1).raise_for_status()
            return process, base
        except httpx.HTTPError:
            assert time.monotonic() < deadline, "tokenlens serve did not start"
            time.sleep(0.05)


def test_twenty_turns_resend_the_same_prefix_and_hit_the_cache(tmp_path: Path) -> None:
    bodies = session_bodies()
    assert len(bodies) == 20
    with FakeAnthropic(prompt_cache=True) as fake:
        process, base = _serve(fake.base_url, tmp_path, "--compress-tools", "elide@0.5", *BUDGET)
        usages = []
        try:
            with httpx.Client(base_url=base, timeout=30) as client:
                for body in bodies:
                    reply = client.post(
                        "/v1/messages",
                        json=body,
                        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
                    )
                    assert reply.status_code == 200, reply.text
                    usages.append(reply.json()["usage"])
                feed = client.get("/tokenlens/feed.json").json()
                metrics = client.get("/metrics").text
        finally:
            process.terminate()
            process.wait(timeout=20)
        sent = [call.body for call in fake.calls()]

    assert len(sent) == 20
    assert feed["fail_opens_total"] == 0, feed["fail_opens"]
    # the proxy compressed tool output behind the breakpoint on every turn but the first
    # (whose only output, 106 characters, is under the size the rungs touch)
    assert feed["tool_output"]["requests"] == 19
    assert feed["tool_output"]["tokens_saved"] > 0
    assert "tokenlens_tool_output_tokens_total" in metrics
    assert sent[-1]["messages"] != bodies[-1]["messages"]
    changed = 0
    for previous, current in itertools.pairwise(sent):
        assert _canonical(current["system"]) == _canonical(previous["system"])
        assert _canonical(current["tools"]) == _canonical(previous["tools"])
        size = len(previous["messages"])
        before, now = _canonical(previous["messages"]), _canonical(current["messages"][:size])
        changed += sum(a != b for a, b in zip(before, now, strict=True)) + abs(
            len(before) - len(now)
        )
    assert changed == 0  # 0 changed bytes in 19 resent prefixes
    assert usages[0]["cache_read_input_tokens"] == 0
    for n in range(1, 20):  # every later turn reads all of the turn before from the cache
        read, prior = usages[n]["cache_read_input_tokens"], usages[n - 1]
        assert read > 0
        assert read == prior["cache_read_input_tokens"] + prior["cache_creation_input_tokens"]


def test_the_cache_check_misses_when_an_earlier_block_changes() -> None:
    bodies = session_bodies()
    cache = PromptCache()
    assert cache.lookup(bodies[0])[0] == 0
    read, write, _ = cache.lookup(bodies[1])
    assert read > 0 and write > 0
    altered = json.loads(json.dumps(bodies[2]))
    altered["messages"][2]["content"][0]["content"] += " "  # one byte in turn 1's output
    read_altered = cache.lookup(altered)[0]
    assert 0 < read_altered < read  # only the system prompt and tools still hit
    assert cache.lookup(bodies[0])[0] > 0  # the same request again is a hit

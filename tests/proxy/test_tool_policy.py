"""The policy's per-kind tool-output arms, applied by the proxy under the class rules."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tokenlens.compress import compress_request
from tokenlens.compress.arms import Arm
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.errors import CompressionError
from tokenlens.policy import Policy, load_policy, write_policy
from tokenlens.proxy.apply import TOOL_FLOOR_ARM, tool_arms_for
from tokenlens.proxy.settings import ProxySettings, parse_tool_arms
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, ProxyServer, entry, messages_body, standard_policy

StartProxy = Callable[..., ProxyServer]
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
SESSION = Path(__file__).parent / "data" / "agent_session.json"
ELIDE = ToolArm("elide", 0.5)


def _tool_policy(verdict: str = "measured", cid: str = "cal-00000001") -> Policy:
    base = standard_policy(cid)
    tool = {"search": entry("search", verdict, "elide", 0.5)}
    return base.model_copy(update={"tool_output": tool})


def _agent_body() -> dict[str, Any]:
    turn = json.loads(SESSION.read_text(encoding="utf-8"))["turns"][8]  # grep self._loop
    use = {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": turn["command"]}}
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 50,
        "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Where does aiohttp use self._loop?"},
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": turn["output"],
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
    }


def _start(
    start_proxy: StartProxy, fake: FakeAnthropic, folder: Path, **settings: Any
) -> ProxyServer:
    """The proxy with `_tool_policy()` published in `folder`."""
    write_policy(_tool_policy(), folder)
    policy = folder / "latest.json"
    return start_proxy(ProxySettings(upstream=fake.base_url, policy_path=policy, **settings))


def _post(proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}/v1/messages", json=body, headers=HEADERS, timeout=30)


def test_policy_file_round_trips_tool_output_entries(tmp_path: Path) -> None:
    write_policy(_tool_policy(), tmp_path)
    loaded = load_policy(tmp_path / "latest.json")
    assert loaded.tool_output["search"].tool_arm == ELIDE
    assert loaded.schema_version == 4


def test_rules_measured_applies_provisional_only_when_allowed_none_gets_lossless() -> None:
    settings = ProxySettings()
    assert tool_arms_for(_tool_policy("measured"), settings) == {"search": ELIDE}
    assert tool_arms_for(_tool_policy("provisional"), settings) == {"search": TOOL_FLOOR_ARM}
    allowed = ProxySettings(allow_provisional=True)
    assert tool_arms_for(_tool_policy("provisional"), allowed) == {"search": ELIDE}
    none = standard_policy().model_copy(update={"tool_output": {"log": entry("log", "none")}})
    assert tool_arms_for(none, settings) == {"log": TOOL_FLOOR_ARM}
    assert tool_arms_for(standard_policy(), settings) == {}  # no tool entries: left alone
    forced = ProxySettings(override_tool_arms=parse_tool_arms("json=lossless"))
    assert tool_arms_for(_tool_policy(), forced) == {"json": ToolArm("lossless")}


def test_proxy_applies_the_policys_tool_arm_and_reports_it_apart(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, tmp_path: Path
) -> None:
    proxy = _start(start_proxy, fake_anthropic, tmp_path, compress_budget_ms=60000)
    body = _agent_body()
    assert _post(proxy, body).status_code == 200
    sent = fake_anthropic.calls("/v1/messages")[-1].body
    expected = compress_request(body, Arm("safe"), tool_arms={"search": ELIDE}).body
    assert sent == expected
    assert (
        sent["messages"][2]["content"][0]["content"] != body["messages"][2]["content"][0]["content"]
    )
    feed = proxy.feed()
    assert feed["tool_output"]["requests"] == 1 and feed["tool_output"]["tokens_saved"] > 0
    metrics = httpx.get(f"{proxy.base_url}/metrics").text
    assert 'tokenlens_tool_output_tokens_total{stage="original"}' in metrics
    assert "Tool output saved" in httpx.get(f"{proxy.base_url}/tokenlens/").text
    # plain traffic: no tool output, the class's own arm only, nothing counted apart
    plain = messages_body()
    _post(proxy, plain)
    assert fake_anthropic.calls("/v1/messages")[-1].body == (
        compress_request(plain, Arm("prune", 0.5)).body
    )
    assert proxy.feed()["tool_output"]["requests"] == 1


def test_a_crashing_codec_fails_open_with_tool_arms(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, tmp_path: Path
) -> None:
    def crash(body: dict[str, Any], arm: Arm, tool_arms: Any = None) -> Any:
        raise CompressionError("injected")

    write_policy(_tool_policy(), tmp_path)
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_path=tmp_path / "latest.json"),
        compressor=crash,
    )
    body = _agent_body()
    assert _post(proxy, body).status_code == 200
    assert fake_anthropic.calls("/v1/messages")[-1].body == body
    assert proxy.feed()["fail_opens"] == {"error:CompressionError": 1}


def test_a_policy_change_of_tool_arms_is_counted(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, tmp_path: Path
) -> None:
    proxy = _start(start_proxy, fake_anthropic, tmp_path, reload_interval_s=0.05)
    # a new calibration with the same tool arms changes no prefix
    write_policy(_tool_policy(cid="cal-22222222"), tmp_path)
    _wait(lambda: proxy.feed()["policy"]["calibration_id"] == "cal-22222222")
    assert proxy.feed()["tool_output"]["policy_changes"] == 0
    write_policy(_tool_policy("provisional", cid="cal-33333333"), tmp_path)
    _wait(lambda: proxy.feed()["policy"]["calibration_id"] == "cal-33333333")
    assert proxy.feed()["tool_output"]["policy_changes"] == 1


def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)

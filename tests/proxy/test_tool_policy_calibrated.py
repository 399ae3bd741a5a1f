"""End to end: a calibration over agent tasks publishes per-kind tool-output arms it
decided itself (the default ladder's tool rungs, walked per kind), and the proxy applies
them by the class rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from tests.calibration.test_agent_calibration import agent_config, run
from tokenlens.compress import compress_request
from tokenlens.compress.arms import Arm
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.config import DEFAULT_TOOL_RUNGS
from tokenlens.decision.tool_kinds import is_tool_arm
from tokenlens.policy import Policy, load_policy
from tokenlens.proxy.apply import TOOL_FLOOR_ARM, tool_arms_for
from tokenlens.proxy.settings import ProxySettings
from tokenlens.report import seed_lines
from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, ProxyServer

HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


@pytest.fixture
def calibrated(
    tmp_path: Path, anthropic: FakeAnthropic
) -> tuple[Policy, list[dict[str, Any]], Path]:
    """Two agent classes calibrated with no tool option given; (policy, tool curve rows,
    root folder)."""
    config = agent_config(
        tmp_path,
        classes=("agent-vcs", "agent-file-read"),
        max_tasks_per_class=8,
        shortest_tasks_first=False,
        methods=("safe",),
        tolerance=0.5,  # a verdict on the few tasks the loopback model answers right
    )
    grades, _ = run(config)
    assert {r["arm"] for r in grades if is_tool_arm(r["arm"])} == {
        f"ext:tools-{rung}" for rung in DEFAULT_TOOL_RUNGS
    }
    policy = load_policy(tmp_path / "reports" / "policy" / "latest.json")
    (table,) = (tmp_path / "store" / "runs").glob("*/tool_curve.parquet")
    return policy, pq.read_table(table).to_pylist(), tmp_path


def test_the_calibration_publishes_per_kind_arms_walked_gentlest_first(
    calibrated: tuple[Policy, list[dict[str, Any]], Path],
) -> None:
    policy, curve, root = calibrated
    assert set(policy.tool_output) == {"vcs", "file-read"}
    for kind, entry in policy.tool_output.items():
        rows = sorted(
            (r for r in curve if r["task_class"] == kind and r["arm"] != "control"),
            key=lambda r: r["reduction"],
        )
        walked = [r for r in rows if r["status"] != "no_savings"]
        statuses = [r["status"] for r in walked]
        # gentlest first: held rungs, then the first failure, then nothing more is held
        stop = next(i for i, s in enumerate(statuses) if s not in ("held",))
        assert statuses[:stop] == ["held"] * stop
        assert "held" not in statuses[stop + 1 :]
        if stop == 0:  # the gentlest rung failed: the kind gets no arm (the proxy passes it)
            assert entry.verdict == "none" and entry.tool_arm is None
            assert entry.cause == "no_arm_held"
            continue
        assert entry.verdict == "provisional" and entry.certified_at is not None
        assert entry.tool_arm == ToolArm.parse(walked[stop - 1]["arm"].removeprefix("ext:tools-"))
        assert entry.n_tasks >= 2
    # vcs holds a lossy rung on the loopback model's answers (file reads may not: the
    # model finds a line by its number, which lossless numbered reads mostly leave out)
    assert policy.tool_output["vcs"].verdict == "provisional"
    # the class entries never carry a tool rung: it is applied per kind, beside them
    assert not any(is_tool_arm(e.method) for e in policy.entries())
    shown = [line for line in seed_lines(policy) if "tool output: " in line]
    assert len(shown) == 2 and any(line.startswith("? tool output: vcs") for line in shown)
    (page,) = (root / "reports" / "runs").glob("*/calibration.md")
    assert "tool output: vcs" in page.read_text() and "tool output: file-read" in page.read_text()


def test_a_rung_that_loses_a_fact_is_refused_whatever_its_grades_and_the_walk_stops(
    calibrated: tuple[Policy, list[dict[str, Any]], Path],
) -> None:
    policy, curve, _ = calibrated
    rows = {r["arm"]: r for r in curve if r["task_class"] == "vcs"}
    refused = [r for r in rows.values() if r["status"] == "unfaithful"]
    assert len(refused) == 1
    (bad,) = refused
    assert bad["facts_lost"] >= 1 and bad["fabricated_lines"] == 0 and bad["unmarked_drops"] == 0
    assert bad["retention"] >= policy.tolerance  # its grades alone would have held it
    harsher = [r for r in rows.values() if r["reduction"] > bad["reduction"]]
    assert all(r["status"] == "not_reached" for r in harsher)
    # the kind's arm is the harshest rung gentler than the refused one, whatever its grades
    gentler = max((r for r in rows.values() if r["status"] == "held"), key=lambda r: r["reduction"])
    assert gentler["reduction"] < bad["reduction"]
    assert policy.tool_output["vcs"].tool_arm == ToolArm.parse(
        gentler["arm"].removeprefix("ext:tools-")
    )
    assert "facts lost" in policy.tool_output["vcs"].reason


StartProxy = Callable[..., ProxyServer]


def test_the_proxy_applies_the_calibrated_arms_by_kind(
    calibrated: tuple[Policy, list[dict[str, Any]], Path],
    fake_anthropic: FakeAnthropic,
    start_proxy: StartProxy,
    tmp_path: Path,
) -> None:
    policy, _, _ = calibrated
    published = tmp_path / "reports" / "policy" / "latest.json"
    task = next(
        t
        for t in load_tasks(AGENT_TASKS_PATH, classes=("agent-vcs",))
        if t.body is not None and len(str(t.body)) > 4000
    )
    body = task.to_request(model="claude-haiku-4-5", max_tokens=64)
    arms = {kind: e.tool_arm for kind, e in policy.tool_output.items() if e.tool_arm}
    assert arms["vcs"] is not None and arms["vcs"].lossy

    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url, policy_path=published, allow_provisional=True
        )
    )
    assert proxy.state.store is not None
    assert tool_arms_for(proxy.state.store.policy, proxy.state.settings) == arms
    sent = _relay(proxy, fake_anthropic, body)
    assert sent == compress_request(body, Arm("safe"), tool_arms=arms).body
    assert sent != compress_request(body, Arm("safe")).body  # the tool output was compressed
    assert proxy.feed()["tool_output"]["tokens_saved"] > 0

    # without --allow-provisional a ? kind gets the lossless floor only
    strict = start_proxy(ProxySettings(upstream=fake_anthropic.base_url, policy_path=published))
    assert strict.state.store is not None
    assert tool_arms_for(strict.state.store.policy, strict.state.settings) == dict.fromkeys(
        arms, TOOL_FLOOR_ARM
    )


def _relay(proxy: ProxyServer, upstream: FakeAnthropic, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{proxy.base_url}/v1/messages", json=body, headers=HEADERS, timeout=30)
    assert response.status_code == 200
    sent: dict[str, Any] = upstream.calls("/v1/messages")[-1].body
    return sent

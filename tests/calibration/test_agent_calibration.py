"""A calibration over the bundled agent set, end to end, graded by the fact grader: against
the loopback Anthropic server, and offline on the embedded model (narrow scopes: the
shortest tasks of one or two kinds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tokenlens.calibration import stages
from tokenlens.calibration.session import open_calibration
from tokenlens.config import CalibrationConfig
from tokenlens.fact_judge import FACTS
from tokenlens.tasks import AGENT_TASKS_PATH, LOOKUP_TASKS_PATH
from tokenlens.testing import FakeAnthropic


def agent_config(root: Path, **overrides: Any) -> CalibrationConfig:
    fields: dict[str, Any] = {
        "backend": "anthropic",
        "model": "claude-haiku-4-5",
        "tasks": AGENT_TASKS_PATH,
        "classes": ("agent-listing", "agent-vcs"),
        "max_tasks_per_class": 3,
        "shortest_tasks_first": True,
        "methods": ("safe", "prune"),
        "rates": (0.6,),
        "repeats": 1,
        "temperature": 0.0,
        "judge": "metric",
        "concurrency": 2,
        "store": root / "store",
        "reports": root / "reports",
        "max_tokens": 256,
    }
    fields.update(overrides)
    return CalibrationConfig(**fields)


def run(config: CalibrationConfig) -> tuple[list[dict[str, Any]], str]:
    """Every stage, as the flow runs them; (grades rows, the report's markdown)."""
    cal, tasks = open_calibration(config)
    try:
        stages.load_stage(config, cal.store, tasks, cal.model)
        compressions = stages.compress_stage(cal, tasks)
        grades = stages.pay_stage(cal, tasks, compressions).grades
        curve = stages.aggregate_stage(cal, grades)
        stages.publish_stage(cal, curve, grades, list(config.classes or ()), None, tasks)
    finally:
        cal.calls.close()  # the client's sockets, not left to the garbage collector
    stored = pq.read_table(Path(config.store) / "runs" / cal.store.run_id / "grades.parquet")
    report = (Path(config.reports) / "runs" / cal.store.run_id / "calibration.md").read_text()
    return stored.to_pylist(), report


def test_against_the_loopback_server_fact_tasks_are_graded_by_their_facts(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    grades, report = run(agent_config(tmp_path))
    assert grades and all(r["error"] is None for r in grades)
    assert {r["judge"] for r in grades} == {"metric"}
    assert all(str(r["note"]).startswith("facts ") for r in grades)
    # the fake answers from the tool output it was sent, so some answers state facts
    assert any(r["grade_clear"] > 0 for r in grades)
    assert "fact grader" in report and "agent-listing" in report
    answers = [r for r in anthropic.calls() if not r.is_judge]
    assert answers
    for call in answers:
        # the agent's body goes out whole: its tools, its tool results; never its facts
        assert call.body["tools"] and "facts" not in json.dumps(call.body)
        assert any(
            b.get("type") == "tool_result"
            for m in call.body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
        )


def test_with_the_llm_judge_the_fact_grader_grades_beside_it(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    config = agent_config(tmp_path, judge="llm", classes=("agent-vcs",), max_tasks_per_class=2)
    grades, report = run(config)
    by_judge = {r["judge"] for r in grades}
    assert by_judge == {"claude-haiku-4-5", FACTS}
    llm = {(r["task_id"], r["arm"]) for r in grades if r["judge"] != FACTS}
    facts = {(r["task_id"], r["arm"]) for r in grades if r["judge"] == FACTS}
    assert llm == facts  # every pair, graded by both
    assert "judge `facts`" in report


def test_a_tool_arm_on_the_class_ladder_is_decided_by_the_class_walk(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    """`methods` holding a tool-output arm (the offline default scope's ladder): the class's
    own walk decides it, and the per-kind walk does not see it."""
    config = agent_config(
        tmp_path,
        tasks=LOOKUP_TASKS_PATH,
        classes=("agent-lookup",),
        max_tasks_per_class=2,
        methods=("ext:tools-lossless",),
        tool_rungs=(),
    )
    grades, _ = run(config)
    assert {r["arm"] for r in grades} == {"control", "ext:tools-lossless"}
    (run_dir,) = (Path(config.store) / "runs").iterdir()
    curve = pq.read_table(run_dir / "curve.parquet").to_pylist()
    walked = {(r["task_class"], r["arm"]) for r in curve if r["task_class"] == "agent-lookup"}
    assert walked == {("agent-lookup", "control"), ("agent-lookup", "ext:tools-lossless")}
    assert not (run_dir / "tool_curve.parquet").exists()  # no per-kind walk of it
    (policy_file,) = (Path(config.reports) / "runs").glob("*/policy.json")
    policy = json.loads(policy_file.read_text())
    assert policy["classes"]["agent-lookup"]["cause"] != "unmeasurable"
    assert not policy.get("tool_output")


@pytest.mark.slow
def test_offline_on_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = agent_config(
        tmp_path,
        backend="local",
        model=None,
        classes=("agent-listing",),
        max_tasks_per_class=3,
        methods=("safe",),
        tool_rungs=("none",),  # the text arm alone: the tool rungs' walk has tests of its own
        concurrency=1,
        max_tokens=192,  # the offline scope's
    )
    grades, report = run(config)
    assert len(grades) == 6  # 3 tasks x (control, safe)
    # the 135M model rambles past max_tokens at times (the offline scope drops such pairs)
    graded = [r for r in grades if r["error"] is None]
    assert all("cut off at max_tokens" in r["error"] for r in grades if r not in graded)
    assert graded and all(str(r["note"]).startswith("facts ") for r in graded)
    assert "fact grader" in report

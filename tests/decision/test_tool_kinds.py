"""The per-kind tool-output decision of a calibration, on grades chosen by hand."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from tests.grade_tables import cell, frame, uniform
from tokenlens.calibration.context import run_ladder
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.config import DEFAULT_TOOL_RUNGS, CalibrationConfig
from tokenlens.decision import aggregate
from tokenlens.decision.tool_kinds import task_kind, tool_curve, tool_entries, without_tool_arms
from tokenlens.policy import PolicyEntry
from tokenlens.proxy.apply import TOOL_FLOOR_ARM, tool_arms_for
from tokenlens.proxy.settings import ProxySettings
from tokenlens.tasks import AGENT_TASKS_PATH, DEFAULT_TASKS_PATH, load_tasks

from ..proxy.conftest import standard_policy


def _grades(tasks: int, lost_on: str | None = None) -> pd.DataFrame:
    """agent-search tasks: the control, a text arm and four tool rungs, every grade equal;
    `lost_on` loses one fact on one task."""
    grades = frame(
        cell("agent-search", "control", uniform(80, 80, tasks=tasks, reps=1)),
        cell("agent-search", "safe", uniform(80, 80, tasks=tasks, reps=1), reduction=0.02),
        *(
            cell(
                "agent-search",
                f"ext:tools-{rung}",
                uniform(80, 80, tasks=tasks, reps=1),
                reduction=r,
            )
            for rung, r in (
                ("lossless", 0.1),
                ("elide@0.9", 0.2),
                ("elide@0.7", 0.4),
                ("elide@0.5", 0.6),
            )
        ),
    )
    grades[["fabricated_lines", "unmarked_drops", "facts_lost"]] = 0
    if lost_on is not None:
        one = (grades["arm"] == lost_on) & (grades["task_id"] == "agent-search-3")
        grades.loc[one, "facts_lost"] = 1
    return grades


def _kinds(grades: pd.DataFrame) -> dict[str, str]:
    return dict.fromkeys(grades["task_id"], "search")


def test_a_fact_lost_on_one_task_refuses_the_rung_and_the_walk_stops_there() -> None:
    grades = _grades(25, lost_on="ext:tools-elide@0.7")
    curve = tool_curve(grades, _kinds(grades), tolerance=0.95, mode="interval", judge="metric")
    assert curve is not None
    status = dict(zip(curve.table["arm"], curve.table["status"], strict=True))
    assert status == {
        "control": "control",
        "ext:tools-lossless": "held",
        "ext:tools-elide@0.9": "held",
        "ext:tools-elide@0.7": "unfaithful",  # perfect grades, one fact lost: a defect
        "ext:tools-elide@0.5": "ignored",  # holds, but past the first failure
    }
    entry = tool_entries(curve)["search"]
    assert entry.tool_arm == ToolArm("elide", 0.9)
    assert entry.verdict == "provisional"  # 25 tasks: ? needs 20, ✓ 60
    assert "1 of the tasks' facts lost" in entry.reason
    # the same grades with no fact lost walk on to the last rung
    clean = _grades(25)
    curve = tool_curve(clean, _kinds(clean), tolerance=0.95, mode="interval", judge="metric")
    assert curve is not None and tool_entries(curve)["search"].tool_arm == ToolArm("elide", 0.5)


def test_enough_tasks_make_a_measured_entry_and_the_class_walk_never_sees_tool_rungs() -> None:
    grades = _grades(60)
    curve = tool_curve(grades, _kinds(grades), tolerance=0.95, mode="interval", judge="metric")
    assert curve is not None
    assert tool_entries(curve)["search"].verdict == "measured"
    classes = aggregate(without_tool_arms(grades), tolerance=0.95)
    assert set(classes.table["arm"]) == {"control", "safe"}
    assert (
        tool_curve(
            without_tool_arms(grades), _kinds(grades), tolerance=0.95, mode="interval", judge=None
        )
        is None
    )


def test_a_task_counts_for_the_kind_the_proxy_gives_the_output_its_facts_come_from() -> None:
    kinds: Counter[tuple[str, str | None]] = Counter(
        (task.task_class, task_kind(task)) for task in load_tasks(AGENT_TASKS_PATH)
    )
    for name in ("search", "listing", "file-read", "json", "log", "vcs"):
        assert {k for c, k in kinds if c == f"agent-{name}"} == {name}
    # dpkg.log slices and changelogs read with sed, tail or zcat | head are logs to the proxy
    assert sum(n for (c, k), n in kinds.items() if c == "agent-log" and k == "log") == 63


def test_the_default_ladder_adds_the_tool_rungs_only_for_tasks_with_tool_output() -> None:
    agent = CalibrationConfig(tasks=AGENT_TASKS_PATH, classes=("agent-vcs",), methods=("safe",))
    resolved = agent.with_tool_rungs(agent.selected_tasks())
    assert resolved.tool_rungs == DEFAULT_TOOL_RUNGS
    assert [a.key for a in run_ladder(resolved)] == [
        "safe",
        *(f"ext:tools-{rung}" for rung in DEFAULT_TOOL_RUNGS),
    ]
    plain = CalibrationConfig(tasks=DEFAULT_TASKS_PATH, methods=("safe",))
    assert run_ladder(plain.with_tool_rungs(plain.selected_tasks())) == run_ladder(plain)
    off = CalibrationConfig(tasks=AGENT_TASKS_PATH, classes=("agent-vcs",), tool_rungs=("none",))
    assert off.with_tool_rungs(off.selected_tasks()).tool_rungs == ()
    rounds = agent.model_copy(update={"design": "sequential"})
    assert rounds.with_tool_rungs(rounds.selected_tasks()).tool_rungs == ()


def test_the_proxy_leaves_a_kind_alone_whose_gentlest_rung_was_refused() -> None:
    def none(cause: str) -> PolicyEntry:
        return PolicyEntry(task_class="log", verdict="none", reason="test", cause=cause)  # type: ignore[arg-type]

    settings = ProxySettings()
    refused = standard_policy().model_copy(update={"tool_output": {"log": none("no_arm_held")}})
    assert tool_arms_for(refused, settings) == {}
    unmeasured = standard_policy().model_copy(
        update={"tool_output": {"log": none("too_few_tasks")}}
    )
    assert tool_arms_for(unmeasured, settings) == {"log": TOOL_FLOOR_ARM}


def test_a_kind_this_run_could_not_measure_keeps_its_last_entry_until_its_age_limit() -> None:
    from datetime import timedelta

    from tokenlens.decision.carryover import carry_over

    previous = standard_policy("cal-11111111")
    measured = PolicyEntry(
        task_class="vcs", verdict="measured", method="elide", rate=0.7, reason="held"
    )
    previous = carry_over(
        previous.model_copy(update={"tool_output": {"vcs": measured}}),
        None,
        max_age=timedelta(days=7),
        now=previous.created,
    )
    assert previous.tool_output["vcs"].expires_at == previous.created + timedelta(days=7)

    def tonight(cause: str) -> PolicyEntry:
        return PolicyEntry(task_class="vcs", verdict="none", reason="tonight", cause=cause)  # type: ignore[arg-type]

    later = previous.created + timedelta(days=1)
    for cause, kept in (("too_few_tasks", True), ("no_arm_held", False)):
        new = standard_policy("cal-22222222").model_copy(
            update={"created": later, "tool_output": {"vcs": tonight(cause)}}
        )
        entry = carry_over(new, previous, max_age=timedelta(days=7), now=later).tool_output["vcs"]
        assert (entry.tool_arm == ToolArm("elide", 0.7)) is kept
        assert (entry.carried_over is not None) is kept
    past = later + timedelta(days=10)
    new = standard_policy("cal-33333333").model_copy(
        update={"created": past, "tool_output": {"vcs": tonight("too_few_tasks")}}
    )
    assert (
        carry_over(new, previous, max_age=timedelta(days=7), now=past).tool_output["vcs"].tool_arm
        is None
    )


def test_the_tool_arm_of_a_calibration_compresses_as_the_proxy_does() -> None:
    import copy

    from tokenlens.compress import Arm, compress_request
    from tokenlens.compress.toolout.kinds import KINDS

    for task in load_tasks(AGENT_TASKS_PATH, classes=("agent-search", "agent-json"))[:6]:
        body = task.to_request(model="m")
        before = copy.deepcopy(body)
        for rung in ("lossless", "elide@0.7"):
            proxy = compress_request(
                body, Arm("control"), tool_arms=dict.fromkeys(KINDS, ToolArm.parse(rung))
            )
            assert compress_request(body, Arm.parse(f"ext:tools-{rung}")).body == proxy.body
        assert body == before

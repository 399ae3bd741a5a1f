"""The offline default scope: what an offline run measures when the user did not say
(the lookup set's first tasks, or a given file's shortest), chosen by a rule (class, size)
so a grown task file still works, and options the user passed are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenlens.cli import build_parser
from tokenlens.commands.calibrate import config_from_args, explicit_options
from tokenlens.config import (
    OFFLINE_MAX_TOKENS,
    OFFLINE_SPARE_TASKS,
    OFFLINE_TOLERANCE,
    OFFLINE_TOOL_METHODS,
    OFFLINE_TOOL_RUNGS,
    CalibrationConfig,
    offline_scope,
)
from tokenlens.decision.evidence import tasks_for_provisional
from tokenlens.tasks import AGENT_TASKS_PATH, LOOKUP_TASKS_PATH, load_tasks

OFFLINE_CLASS = "extraction"  # the class taken from a starter-like file


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def task_file(tmp_path: Path, classes: dict[str, int]) -> Path:
    lines = []
    for name, count in classes.items():
        for i in range(count):
            lines.append(
                {
                    "id": f"{name}-{i}",
                    "task_class": name,
                    "question": "Which invoice is open?",
                    "context": "x " * (10 + (count - i) * 5),  # later tasks are shorter
                    "reference": "INV-1",
                }
            )
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def scope_of(*argv: str) -> tuple[CalibrationConfig, str]:
    args = build_parser().parse_args(["calibrate", *argv])
    scope = offline_scope(config_from_args(args), explicit=explicit_options(args))
    return scope.config, scope.banner()


def test_the_default_scope_is_one_class_its_shortest_tasks_greedy_two_arms(
    tmp_path: Path,
) -> None:
    path = task_file(tmp_path, {OFFLINE_CLASS: 50, "summarization": 30})
    config, banner = scope_of("--tasks", str(path))
    need = tasks_for_provisional(config.tolerance)
    assert config.classes == (OFFLINE_CLASS,)
    assert config.max_tasks_per_class == need + OFFLINE_SPARE_TASKS
    assert config.shortest_tasks_first
    picked = config.selected_tasks()
    assert len(picked) == need + OFFLINE_SPARE_TASKS
    shortest = range(50 - need - OFFLINE_SPARE_TASKS, 50)
    assert {t.id for t in picked} == {f"{OFFLINE_CLASS}-{i}" for i in shortest}
    assert (config.repeats, config.temperature) == (1, 0.0)
    assert (config.tolerance, config.max_tokens) == (OFFLINE_TOLERANCE, OFFLINE_MAX_TOKENS)
    assert (config.methods, config.rates) == (("safe", "prune"), (0.6,))
    assert config.design == "fixed"  # a failing arm is reported by its interval
    shortest = f"{need + OFFLINE_SPARE_TASKS} shortest"
    for words in (f"class {OFFLINE_CLASS}", "--classes all", shortest, "--repeats 3", "greedy",
                  "--judge both", "--tolerance 0.95"):  # fmt: skip
        assert words in banner
    assert "lookup set" not in banner  # the file the user gave is kept


def test_with_no_task_file_the_lookup_set_its_first_tasks_two_tool_arms() -> None:
    """No options at all (what `make run` passes): the lookup set, in the file's order (it
    mixes its questions), the tool-output rungs as the class's own ladder."""
    config, banner = scope_of()
    need = tasks_for_provisional(OFFLINE_TOLERANCE)
    assert need == 10 and config.tasks == LOOKUP_TASKS_PATH
    assert config.classes == ("agent-lookup",) and not config.shortest_tasks_first
    first = [t.id for t in load_tasks(LOOKUP_TASKS_PATH)][: need + OFFLINE_SPARE_TASKS]
    assert [t.id for t in config.selected_tasks()] == first
    assert config.methods == OFFLINE_TOOL_METHODS and config.tool_rungs == ()
    assert config.with_tool_rungs(config.selected_tasks()).tool_rungs == ()
    for words in ("lookup set", "--tasks tasks_data/agent", "ext:tools-elide@0.9",
                  f"its {need + OFFLINE_SPARE_TASKS} first tasks", "--tolerance 0.95"):  # fmt: skip
        assert words in banner
    kept, _ = scope_of("--tolerance", "0.95")
    assert kept.tolerance == 0.95 and kept.max_tasks_per_class == 20 + OFFLINE_SPARE_TASKS
    # classes named on their own are the starter set's
    starter, banner = scope_of("--classes", OFFLINE_CLASS)
    assert starter.tasks != LOOKUP_TASKS_PATH and starter.classes == (OFFLINE_CLASS,)
    assert starter.methods == ("safe", "prune") and "lookup set" not in banner
    assert {t.task_class for t in starter.selected_tasks()} == {OFFLINE_CLASS}


def test_options_the_user_passed_are_kept(tmp_path: Path) -> None:
    path = task_file(tmp_path, {OFFLINE_CLASS: 30, "summarization": 30})
    config, banner = scope_of(
        "--tasks", str(path), "--classes", "all", "--repeats", "2", "--temperature", "1",
        "--methods", "safe,minify", "--max-tasks-per-class", "5",
    )  # fmt: skip
    assert config.classes is None and config.repeats == 2 and config.temperature == 1.0
    assert config.methods == ("safe", "minify") and config.max_tasks_per_class == 5
    assert len(config.selected_tasks()) == 10  # both classes, 5 each
    assert f"class {OFFLINE_CLASS}" not in banner and "greedy" not in banner
    assert config.judge == "metric" and "--judge both" in banner  # not passed: said, kept
    listed, _ = scope_of("--tasks", str(path), "--classes", "summarization")
    assert listed.classes == ("summarization",)


def test_a_task_file_without_the_class_keeps_every_class(tmp_path: Path) -> None:
    path = task_file(tmp_path, {"summarization": 30, "chat-history": 30})
    config, _ = scope_of("--tasks", str(path))
    assert config.classes is None
    assert {t.task_class for t in config.selected_tasks()} == {"summarization", "chat-history"}


def test_an_online_run_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    config, banner = scope_of()
    assert config == config_from_args(build_parser().parse_args(["calibrate"]))
    assert banner == ""


def test_a_chosen_design_is_kept_and_shards_keep_the_fixed_design(tmp_path: Path) -> None:
    """The offline scope keeps the fixed design, and a design the user chose; shards split
    the fixed design's plan (the flow refuses shards with the sequential design)."""
    path = task_file(tmp_path, {OFFLINE_CLASS: 30})
    assert scope_of("--tasks", str(path), "--design", "sequential")[0].design == "sequential"
    config, banner = scope_of("--tasks", str(path), "--shards", "2")
    assert config.design == "fixed" and "design" not in banner


def test_tasks_with_tool_output_get_two_tool_arms_offline(tmp_path: Path) -> None:
    config, banner = scope_of("--tasks", str(AGENT_TASKS_PATH), "--classes", "agent-vcs")
    assert config.methods == OFFLINE_TOOL_METHODS and config.tool_rungs == ()
    given, _ = scope_of("--tasks", str(AGENT_TASKS_PATH), "--tool-rungs", "elide@0.5")
    assert given.tool_rungs == ("elide@0.5",) and given.methods == ("safe", "prune")
    text_arms, banner = scope_of(
        "--tasks", str(AGENT_TASKS_PATH), "--classes", "agent-vcs", "--methods", "safe"
    )
    assert text_arms.tool_rungs == OFFLINE_TOOL_RUNGS and "--tool-rungs" in banner
    plain, banner = scope_of("--tasks", str(task_file(tmp_path, {OFFLINE_CLASS: 30})))
    assert plain.tool_rungs is None and "--tool-rungs" not in banner

"""The task loader: the seed's shape loads unchanged; every bad input names line and field."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tokenlens.cli import main
from tokenlens.errors import TaskFileError
from tokenlens.tasks import (
    DEFAULT_TASKS_PATH,
    KNOWN_CLASSES,
    load_tasks,
    select_tasks,
    write_tasks,
)

SEED_LINE = {
    "id": "num-budget-01",
    "task_class": "numeric-reasoning",
    "question": "What is the remaining budget?",
    "context": "The team had $12,000 and spent $4,250 on hosting.",
    "reference": "$7,750",
}


def write_lines(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def good(**changes: object) -> str:
    return json.dumps({**SEED_LINE, **changes})


def test_seed_shape_loads_unchanged(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [good(), good(id="num-budget-02")])
    tasks = load_tasks(path)
    assert [t.id for t in tasks] == ["num-budget-01", "num-budget-02"]
    assert tasks[0].model_dump(include=set(SEED_LINE)) == SEED_LINE
    assert tasks[0].history == () and tasks[0].system is None


def test_optional_fields_for_real_prompts(tmp_path: Path) -> None:
    line = good(
        system="You are a careful accountant.",
        history=[{"role": "user", "content": "Use USD."}, {"role": "assistant", "content": "OK."}],
        tags=["money"],
    )
    (task,) = load_tasks(write_lines(tmp_path, [line]))
    body = task.to_request(model="m", max_tokens=64)
    assert body["system"] == "You are a careful accountant."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    last = body["messages"][-1]["content"]
    assert [block["text"] for block in last] == [task.context, task.question]


def rejection(tmp_path: Path, lines: list[str]) -> str:
    with pytest.raises(TaskFileError) as info:
        load_tasks(write_lines(tmp_path, lines))
    return str(info.value)


def test_malformed_json_names_line(tmp_path: Path) -> None:
    message = rejection(tmp_path, [good(), '{"id": "x", "task_class": '])
    assert "tasks.jsonl:2:" in message and "malformed JSON" in message


def test_missing_field_names_line_and_field(tmp_path: Path) -> None:
    line = json.dumps({k: v for k, v in SEED_LINE.items() if k != "reference"})
    message = rejection(tmp_path, [line])
    assert "tasks.jsonl:1:" in message and "'reference'" in message and "missing" in message


@pytest.mark.parametrize("field", ["question", "context", "reference", "id", "task_class"])
def test_empty_field_names_line_and_field(tmp_path: Path, field: str) -> None:
    second = {"id": "a-2", field: "   "}
    message = rejection(tmp_path, [good(id="a-1"), good(**second)])
    assert "tasks.jsonl:2:" in message and f"'{field}'" in message


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    message = rejection(tmp_path, [good(), good(id="other"), good()])
    assert "tasks.jsonl:3:" in message and "'id'" in message and "line 1" in message


def test_unknown_field_is_rejected(tmp_path: Path) -> None:
    message = rejection(tmp_path, [good(answer="42")])
    assert "tasks.jsonl:1:" in message and "'answer'" in message and "not a known field" in message


def test_wrong_type_names_field(tmp_path: Path) -> None:
    message = rejection(tmp_path, [good(tags="money")])
    assert "tasks.jsonl:1:" in message and "'tags'" in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="does not exist"):
        load_tasks(tmp_path / "nope.jsonl")


def test_bad_file_never_half_loads(tmp_path: Path) -> None:
    """Every error is reported at once and no task is returned."""
    message = rejection(tmp_path, [good(), "not json", good(id="ok-2"), good(id="ok-2")])
    assert "tasks.jsonl:2:" in message and "tasks.jsonl:4:" in message


def test_class_filter_rejects_unknown_class(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [good()])
    assert len(load_tasks(path, classes=["numeric-reasoning"])) == 1
    with pytest.raises(TaskFileError, match="no tasks of class extraction"):
        load_tasks(path, classes=["extraction"])


def test_bundled_set_has_sixty_per_class() -> None:
    # 60 tasks per class is what a ✓ needs at the default 95 % tolerance (minimum evidence).
    tasks = load_tasks(DEFAULT_TASKS_PATH)
    counts = Counter(task.task_class for task in tasks)
    assert set(counts) == set(KNOWN_CLASSES)
    assert min(counts.values()) >= 60
    assert len(tasks) >= 420
    for name in KNOWN_CLASSES:  # tasks where compression is likely to hurt sit beside safe ones
        tags = [t.tags for t in tasks if t.task_class == name]
        fragile = sum(any(tag.startswith("fragile:") for tag in these) for these in tags)
        assert 0.1 * len(tags) <= fragile <= 0.6 * len(tags), (name, fragile)
    # the 140 written tasks come first, so "the first N per class" stays the same sample
    assert [t.id for t in tasks[:140]] == [
        t.id for t in load_tasks(DEFAULT_TASKS_PATH / "00-written.jsonl")
    ]


def test_a_third_of_the_long_prompt_classes_have_10k_to_50k_token_contexts() -> None:
    """Compression pays on long prompts, so the classes built on them carry long ones."""
    from tokenlens.tokens import estimate_tokens

    tasks = load_tasks(DEFAULT_TASKS_PATH)
    for name in ("long-doc-qa", "summarization", "code-context"):
        mine = [t for t in tasks if t.task_class == name]
        # a long context is over 30,000 characters; count tokens only for those
        long = [t for t in mine if len(t.context) > 30_000]
        sizes = [estimate_tokens(t.context) for t in long]
        assert sum(10_000 <= s <= 50_000 for s in sizes) * 3 >= len(mine), (name, sizes)


def test_every_committed_task_file_is_under_5_mb() -> None:
    for path in sorted(DEFAULT_TASKS_PATH.parent.rglob("*")):
        if path.is_file():
            assert path.stat().st_size < 5_000_000, path


def test_a_folder_loads_its_jsonl_files_in_name_order(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "b.jsonl").write_text(good(id="b-1") + "\n", encoding="utf-8")
    (folder / "a.jsonl").write_text(good(id="a-1") + "\n" + good(id="a-2") + "\n")
    (folder / "notes.txt").write_text("not a task file")
    assert [t.id for t in load_tasks(folder)] == ["a-1", "a-2", "b-1"]
    assert [t.id for t in load_tasks(folder / "b.jsonl")] == ["b-1"]  # one file still works
    with pytest.raises(TaskFileError, match=r"set: no tasks of class extraction"):
        load_tasks(folder, classes=["extraction"])


def test_a_folder_reports_every_bad_line_with_its_file(tmp_path: Path) -> None:
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "a.jsonl").write_text(good(id="x-1") + "\n" + "{" + "\n", encoding="utf-8")
    (folder / "b.jsonl").write_text(good(id="ok") + "\n" + good(id="x-1") + "\n")
    with pytest.raises(TaskFileError) as info:
        load_tasks(folder)
    message = str(info.value)
    assert "a.jsonl:2: malformed JSON" in message
    assert "b.jsonl:2: field 'id' duplicates id 'x-1' first seen on" in message
    assert "a.jsonl:1" in message


def test_a_folder_without_task_files_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match=r"holds no \*\.jsonl task file"):
        load_tasks(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    (tmp_path / "blank.jsonl").write_text("")
    with pytest.raises(TaskFileError, match="no tasks in any file"):
        load_tasks(tmp_path)


def test_validate_command_prints_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "validate", str(DEFAULT_TASKS_PATH)]) == 0
    out = capsys.readouterr().out
    for name in KNOWN_CLASSES:
        assert name in out
    assert "estimate" in out


def test_validate_command_fails_on_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path, [good(), "{"])
    assert main(["tasks", "validate", str(path)]) == 2
    assert "tasks.jsonl:2:" in capsys.readouterr().err


def test_select_tasks_caps_per_class_in_file_order_or_shortest_first(tmp_path: Path) -> None:
    lines = [
        good(id="n-long", context="x " * 300),
        good(id="n-short", context="short context"),
        good(id="n-mid", context="y " * 50),
        good(id="e-1", task_class="extraction"),
    ]
    tasks = load_tasks(write_lines(tmp_path, lines))
    first = select_tasks(tasks, max_per_class=2)
    assert [t.id for t in first] == ["n-long", "n-short", "e-1"]
    shortest = select_tasks(tasks, max_per_class=2, shortest_first=True)
    assert [t.id for t in shortest] == ["n-short", "n-mid", "e-1"]  # file order kept
    assert select_tasks(tasks) == tasks


AGENT_BODY = {
    "system": [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}
    ],
    "tools": [
        {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}
    ],
    "messages": [
        {"role": "user", "content": "Where is the version set?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "bash",
                    "input": {"command": "grep -rn version ."},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "setup.py:3:version='1.0'",
                },
                {"type": "text", "text": "Which file and line set the version?"},
            ],
        },
    ],
}


def test_an_agent_task_carries_its_body_and_facts(tmp_path: Path) -> None:
    line = json.dumps(
        {
            "id": "agent-1",
            "task_class": "agent-search",
            "reference": "setup.py, line 3.",
            "body": AGENT_BODY,
            "facts": [{"kind": "path_line", "value": "setup.py:3", "source": "toolu_1"}],
        }
    )
    (task,) = load_tasks(write_lines(tmp_path, [line]))
    assert task.context == "setup.py:3:version='1.0'"
    assert task.question == "Which file and line set the version?"
    assert task.facts[0].source == "toolu_1"
    sent = task.to_request(model="m", max_tokens=64)
    assert sent["model"] == "m" and sent["max_tokens"] == 64
    assert sent["messages"] == AGENT_BODY["messages"] and sent["system"] == AGENT_BODY["system"]
    sent["messages"].clear()  # a deep copy: the task is not changed through it
    assert task.to_request(model="m")["messages"] == AGENT_BODY["messages"]
    out = tmp_path / "out.jsonl"
    write_tasks([task], out)
    stored = json.loads(out.read_text())
    assert "context" not in stored and "question" not in stored  # the output is stored once
    assert load_tasks(out) == [task]


def test_an_agent_body_without_messages_is_refused(tmp_path: Path) -> None:
    line = json.dumps({"id": "a", "task_class": "agent-json", "reference": "r", "body": {}})
    assert "body.messages" in rejection(tmp_path, [line])


def test_a_bad_fact_names_its_field(tmp_path: Path) -> None:
    message = rejection(tmp_path, [good(facts=[{"kind": "colour", "value": "red"}])])
    assert "tasks.jsonl:1: field 'facts.0.kind'" in message

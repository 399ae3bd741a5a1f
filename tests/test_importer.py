"""`tokenlens tasks import`: JSONL, CSV and Parquet in; the loader's strict errors on bad rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenlens.cli import main
from tokenlens.errors import TaskFileError
from tokenlens.importer import import_tasks, parse_mapping
from tokenlens.tasks import load_tasks

MAP = "question=prompt,context=document,reference=answer"
ROWS = [
    {
        "prompt": "What is left of the budget?",
        "document": "The team had $12,000 and spent $4,250 on hosting.",
        "answer": "$7,750",
        "kind": "numeric-reasoning",
        "notes": "ignored column",
    },
    {
        "prompt": "Who signed the lease?",
        "document": "The lease was signed by Maria Chen on 3 May.\n\nRent is due monthly.",
        "answer": "Maria Chen",
        "kind": "extraction",
        "notes": "",
    },
]


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _csv(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _parquet(path: Path, rows: list[dict[str, object]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("write", [_jsonl, _csv, _parquet], ids=["jsonl", "csv", "parquet"])
def test_each_format_imports_through_the_cli_and_passes_the_loader(
    tmp_path: Path, write: object, capsys: pytest.CaptureFixture[str]
) -> None:
    suffix = {"_jsonl": ".jsonl", "_csv": ".csv", "_parquet": ".parquet"}[write.__name__]  # type: ignore[attr-defined]
    source = write(tmp_path / f"eval set{suffix}", ROWS)  # type: ignore[operator]
    out = tmp_path / "tasks.jsonl"
    code = main(
        ["tasks", "import", str(source), "--map", MAP + ",task_class=kind", "--out", str(out)]
    )
    assert code == 0
    tasks = load_tasks(out)
    assert [t.id for t in tasks] == ["eval-set-00001", "eval-set-00002"]
    assert [t.task_class for t in tasks] == ["numeric-reasoning", "extraction"]
    assert tasks[1].context == ROWS[1]["document"] and tasks[1].reference == "Maria Chen"
    assert "wrote 2 tasks" in capsys.readouterr().out


def test_same_named_columns_need_no_map_and_task_class_can_be_given(tmp_path: Path) -> None:
    rows = [{"question": "Q?", "context": "Some context.", "reference": "A", "id": "my-1"}]
    tasks = import_tasks(_csv(tmp_path / "a.csv", rows), {}, task_class="extraction")
    assert tasks[0].id == "my-1" and tasks[0].task_class == "extraction"


def test_history_and_tags_come_from_json_cells(tmp_path: Path) -> None:
    rows = [
        {
            **{k: ROWS[0][k] for k in ("prompt", "document", "answer")},
            "hist": json.dumps(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
            ),
            "labels": json.dumps(["eval", "q3"]),
        }
    ]
    tasks = import_tasks(
        _csv(tmp_path / "h.csv", rows),
        parse_mapping(MAP + ",history=hist,tags=labels"),
        task_class="chat-history",
    )
    assert [turn.role for turn in tasks[0].history] == ["user", "assistant"]
    assert tasks[0].tags == ("eval", "q3")


def test_bad_rows_are_all_reported_with_location_field_and_column(tmp_path: Path) -> None:
    rows = [
        ROWS[0],
        {**ROWS[1], "answer": "  "},  # blank required field; its document spans 3 lines
        {**ROWS[0], "kind": "Not A Class"},  # pattern
    ]
    source = _csv(tmp_path / "bad.csv", rows)
    with pytest.raises(TaskFileError) as caught:
        import_tasks(source, parse_mapping(MAP + ",task_class=kind"))
    message = str(caught.value)
    # CSV rows are named by their line in the file (row 2 spans lines 3-5)
    assert (
        f"{source}:3: field 'reference' Value error, must not be empty or only whitespace "
        "(column 'answer')" in message
    )
    assert f"{source}:6: field 'task_class'" in message and "(column 'kind')" in message
    assert f"{source}:2:" not in message


def test_jsonl_errors_name_the_line_and_nothing_is_written(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(
        json.dumps(ROWS[0]) + "\n{not json\n" + json.dumps({**ROWS[1], "answer": 42}) + "\n[1]\n"
    )
    out = tmp_path / "out.jsonl"
    code = main(
        ["tasks", "import", str(source), "--map", MAP, "--task-class", "x", "--out", str(out)]
    )
    assert code == 2 and not out.exists()
    with pytest.raises(TaskFileError) as caught:
        import_tasks(source, parse_mapping(MAP), task_class="x")
    message = str(caught.value)
    assert f"{source}:2: malformed JSON" in message
    assert (
        f"{source}:3: field 'reference' Input should be a valid string (column 'answer')" in message
    )
    assert f"{source}:4: expected a JSON object, got list" in message


def test_parquet_rows_are_named_by_row_number(tmp_path: Path) -> None:
    rows = [ROWS[0], {**ROWS[1], "answer": None}]
    source = _parquet(tmp_path / "p.parquet", rows)
    with pytest.raises(TaskFileError, match=r"p\.parquet:row 2: field 'reference' is required"):
        import_tasks(source, parse_mapping(MAP), task_class="extraction")


def test_missing_mapped_column_duplicate_ids_and_no_class(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "d.jsonl", [{**ROWS[0], "id": "same"}, {**ROWS[1], "id": "same"}])
    with pytest.raises(TaskFileError) as caught:
        import_tasks(source, parse_mapping(MAP), task_class="extraction")
    assert f"{source}:2: field 'id' duplicates id 'same' first seen at {source}:1" in str(
        caught.value
    )
    with pytest.raises(
        TaskFileError, match=r"d\.jsonl:1: field 'question' column 'missing' is missing"
    ):
        import_tasks(source, parse_mapping("question=missing"), task_class="extraction")
    with pytest.raises(TaskFileError, match=r"field 'task_class' is required.*--task-class"):
        import_tasks(source, parse_mapping(MAP))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("question", "is not FIELD=COLUMN"),
        ("answer=reference", "'answer' is not a task field"),
        ("question=a,question=b", "mapped twice"),
    ],
)
def test_bad_maps_are_refused(text: str, problem: str) -> None:
    with pytest.raises(TaskFileError, match=problem):
        parse_mapping(text)


def test_unknown_suffix_needs_format(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "rows.txt", ROWS)
    with pytest.raises(TaskFileError, match="pass --format"):
        import_tasks(source, parse_mapping(MAP), task_class="x")
    assert len(import_tasks(source, parse_mapping(MAP), task_class="x", fmt="jsonl")) == 2

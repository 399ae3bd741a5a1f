"""The table records: Arrow schemas derived from them, and mypy rejecting a misspelled field."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TypedDict

import pyarrow as pa
import pytest
from mypy import api as mypy_api

from tokenlens import tables
from tokenlens.tables import Int32, Int64, arrow_schema

REPO = Path(__file__).resolve().parents[1]


class Sample(TypedDict):
    name: str
    count: Int32
    total: Int64 | None
    share: float | None
    flag: bool
    status: tables.CompressionStatus


def test_schema_follows_the_record() -> None:
    assert arrow_schema(Sample) == pa.schema(
        [
            pa.field("name", pa.string(), nullable=False),
            pa.field("count", pa.int32(), nullable=False),
            pa.field("total", pa.int64()),
            pa.field("share", pa.float64()),
            pa.field("flag", pa.bool_(), nullable=False),
            pa.field("status", pa.string(), nullable=False),
        ]
    )
    assert not arrow_schema(Sample).field("count").nullable


class BareInt(TypedDict):
    n: int


class TwoTypes(TypedDict):
    x: str | float


@pytest.mark.parametrize(
    ("record", "where"), [(BareInt, "BareInt.n: no Arrow type"), (TwoTypes, "TwoTypes.x")]
)
def test_a_column_without_one_arrow_type_is_refused(record: type, where: str) -> None:
    with pytest.raises(TypeError, match=where):
        arrow_schema(record)


def test_every_table_is_its_record() -> None:
    for schema, record in [
        (tables.GRADES, tables.GradeRow),
        (tables.CURVE, tables.CurveRow),
        (tables.TASKS, tables.TaskRow),
        (tables.COMPRESSIONS, tables.CompressionRow),
        (tables.ANSWERS, tables.AnswerRow),
        (tables.CALLS, tables.CallRow),
    ]:
        assert schema.names == list(record.__annotations__)


def test_the_columns_the_decision_requires_are_grade_columns() -> None:
    from tokenlens.decision.grades import REQUIRED

    assert set(REQUIRED) <= set(tables.GradeRow.__annotations__)


def _mypy(tmp_path: Path, name: str, source: str) -> tuple[str, int]:
    snippet = tmp_path / f"{name}.py"  # one file per case: mypy's cache goes by size and mtime
    snippet.write_text(textwrap.dedent(source), encoding="utf-8")
    out, err, status = mypy_api.run(
        [
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--no-error-summary",
            str(snippet),
        ]
    )
    return out + err, status


ROW = """\
    from tokenlens.tables import TaskRow

    row: TaskRow = {
        "task_id": "t1",
        "task_class": "extraction",
        "content_hash": "0" * 64,
        "request_json": "{}",
        "tokens": 12,
    }
    print(row["task_class"])
"""


def test_mypy_rejects_a_misspelled_field(tmp_path: Path) -> None:
    """The guarantee typed rows exist for: a wrong key is a type error, not a null column."""
    output, status = _mypy(tmp_path, "good", ROW)
    assert status == 0, output  # the well-spelled row type-checks ...
    misspelled = ROW.replace('"task_class": "extraction"', '"task_clas": "extraction"')
    output, status = _mypy(tmp_path, "misspelled_key", misspelled)
    assert status == 1
    assert 'Extra key "task_clas" for TypedDict "TaskRow"' in output
    misread = ROW.replace('row["task_class"]', 'row["taskclass"]')
    output, status = _mypy(tmp_path, "misread_key", misread)
    assert status == 1
    assert 'TypedDict "TaskRow" has no key "taskclass"' in output

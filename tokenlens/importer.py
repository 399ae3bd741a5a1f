"""`tokenlens tasks import`: a JSONL, CSV or Parquet file users already have -> a task file.

Eval sets come with their own column names (`prompt`, `document`, `answer`, …). `--map
question=prompt,context=document,reference=answer` says which column fills which task
field; a column already named like a field needs no mapping, and other columns are
ignored. The errors are the loader's (`tokenlens.tasks`): every problem, each with the
file, the line (JSONL, CSV) or row (Parquet) and the field, and nothing is written unless
every row makes a valid task.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tokenlens.errors import TaskFileError, json_problem
from tokenlens.tasks import CalibrationTask

FIELDS = tuple(CalibrationTask.model_fields)
FORMATS = ("jsonl", "csv", "parquet")
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
#: More problems than this are summarised: the first ones show what is wrong.
MAX_ERRORS = 50
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def parse_mapping(text: str | None) -> dict[str, str]:
    """`field=column,...` -> {field: column}; TaskFileError naming a bad or unknown part."""
    mapping: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        field, sep, column = part.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not field or not column:
            raise TaskFileError(f"--map: {part.strip()!r} is not FIELD=COLUMN")
        if field not in FIELDS:
            raise TaskFileError(
                f"--map: {field!r} is not a task field (fields: {', '.join(FIELDS)})"
            )
        if field in mapping:
            raise TaskFileError(f"--map: field {field!r} is mapped twice")
        mapping[field] = column
    return mapping


def detect_format(path: Path, given: str | None = None) -> str:
    if given is not None:
        return given
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise TaskFileError(
            f"{path}: cannot tell the format from the name; pass --format jsonl|csv|parquet"
        )
    return fmt


def import_tasks(
    path: Path,
    mapping: dict[str, str],
    *,
    task_class: str | None = None,
    fmt: str | None = None,
) -> list[CalibrationTask]:
    """Read every row of `path` into a task; TaskFileError listing every bad row and field.

    `task_class` fills the class of rows that have none (no mapped or same-named column).
    Rows without an id get `<file stem>-<row number>`.
    """
    if not path.is_file():
        raise TaskFileError(f"{path}: file does not exist")
    fmt = detect_format(path, fmt)
    stem = _ID_UNSAFE.sub("-", path.stem).strip("-._") or "task"
    tasks: list[CalibrationTask] = []
    errors: list[str] = []
    first_seen: dict[str, str] = {}
    for number, (where, row) in enumerate(_rows(path, fmt), start=1):
        if isinstance(row, str):  # a row that could not be read at all
            errors.append(f"{where}: {row}")
            continue
        raw, problems = _fields(row, mapping, where)
        errors.extend(problems)
        if problems:
            continue
        raw.setdefault("id", f"{stem}-{number:05d}")
        if "task_class" not in raw and task_class is not None:
            raw["task_class"] = task_class
        if "task_class" not in raw:
            errors.append(
                f"{where}: field 'task_class' is required but missing (map a column with "
                "--map task_class=COLUMN or pass --task-class)"
            )
            continue
        try:
            task = CalibrationTask.model_validate(raw)
        except ValidationError as exc:
            errors.extend(_validation_problems(where, exc, mapping))
            continue
        if task.id in first_seen:
            errors.append(
                f"{where}: field 'id' duplicates id {task.id!r} first seen at {first_seen[task.id]}"
            )
            continue
        first_seen[task.id] = where
        tasks.append(task)
    if errors:
        shown = errors[:MAX_ERRORS]
        if len(errors) > MAX_ERRORS:
            shown.append(f"… and {len(errors) - MAX_ERRORS} more problems")
        raise TaskFileError("\n".join(shown))
    if not tasks:
        raise TaskFileError(f"{path}: no rows in file")
    return tasks


def _rows(path: Path, fmt: str) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """(location, row) pairs; a row is a problem message when it cannot be read."""
    if fmt == "jsonl":
        yield from _jsonl_rows(path)
    elif fmt == "csv":
        yield from _csv_rows(path)
    elif fmt == "parquet":
        yield from _parquet_rows(path)
    else:
        raise TaskFileError(f"{path}: unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any] | str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{path}: cannot read file ({exc})") from exc
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            yield where, f"malformed JSON ({json_problem(exc)})"
            continue
        if not isinstance(value, dict):
            yield where, f"expected a JSON object, got {type(value).__name__}"
            continue
        yield where, value


def _csv_rows(path: Path) -> Iterator[tuple[str, dict[str, Any] | str]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle, strict=True)
            start = 2
            for row in reader:
                where = f"{path}:{start}"
                start = reader.line_num + 1
                if None in row:
                    yield where, "more cells than the header has columns"
                    continue
                yield where, {key: value for key, value in row.items() if key is not None}
    except csv.Error as exc:
        raise TaskFileError(f"{path}: malformed CSV ({exc})") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{path}: cannot read file ({exc})") from exc


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict[str, Any] | str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise TaskFileError(f"{path}: cannot read Parquet ({exc})") from exc
    for index, row in enumerate(rows, start=1):
        yield f"{path}:row {index}", row


def _fields(
    row: dict[str, Any], mapping: dict[str, str], where: str
) -> tuple[dict[str, Any], list[str]]:
    """The task fields of one row, by mapping (or same-named column); problems if not."""
    raw: dict[str, Any] = {}
    problems: list[str] = []
    for field in FIELDS:
        column = mapping.get(field, field)
        if column not in row:
            if field in mapping:
                problems.append(f"{where}: field '{field}' column {column!r} is missing")
            continue
        value = row[column]
        if value is None or (value == "" and field in ("system", "history", "tags")):
            continue  # an empty cell of an optional field: absent
        if field in ("history", "tags") and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(f"{where}: field '{field}' is not a JSON list (column {column!r})")
                continue
        raw[field] = value
    return raw, problems


def _validation_problems(where: str, exc: ValidationError, mapping: dict[str, str]) -> list[str]:
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "(row)"
        top = str(err["loc"][0]) if err["loc"] else ""
        column = f" (column {mapping[top]!r})" if top in mapping else ""
        msg = "is required but missing" if err["type"] == "missing" else err["msg"]
        problems.append(f"{where}: field '{field}' {msg}{column}")
    return problems

"""JSON codecs with an exact decode: minified JSON, and a JSON array of objects as a table.

Both are exact on JSON's data model: decoding gives back the same values, with the same
types (``1`` is not ``1.0`` is not ``true``), the same array order and the same keys;
only insignificant whitespace and the order of an object's keys (which JSON does not
define) may differ. `same` is that equality.

The table (``to_table`` / ``from_table``) writes an array of objects that all have the
same keys, in the same order, with scalar values::

    [json table: 3 rows] name | version | yanked
    requests | 2.32.3 | false
    "2.0" | 1.0.0 | null

A cell is the value's JSON text, except a string, which is written bare when that
cannot be mistaken for anything else (not empty, no ``|``, no leading or trailing
space, no control character, not itself valid JSON, not starting with a quote or
bracket, not a marker). Rows may be replaced by an item marker
(`tokenlens.compress.toolout.markers`) where they were.

`from_csv_schema` reads the ``[N]{col:type,...}`` CSV form other compressors write
(headroom-ai; llmtrim's TOON ``[N]{col,...}:`` with rows indented by two spaces), so the
fidelity check can decode it instead of calling it fabricated; the rows it says it
dropped (``__dropped:k``) are reported as a count.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tokenlens.compress.toolout.markers import Marker, parse_any

TABLE_HEAD = re.compile(r"^\[json table: (?P<rows>\d+) rows?\] (?P<keys>.*)$")
CSV_HEAD = re.compile(r"^\[(?P<rows>\d+)\]\{(?P<cols>[^}]*)\}(?P<rest>.*)$")
#: A value replaced where it stood by a retrieval handle naming its kind and size
#: (headroom-ai: ``<<ccr:HASH,string,307B>>``): a marker for that one value.
OPAQUE = re.compile(r"^<<ccr:[0-9a-f]+,[\w-]+,\d+(?:\.\d+)?[KMG]?B>>$")
CCR_SENTINEL = re.compile(r"<<ccr:[^ >]* ?(?P<n>\d+)_(?:rows|items)_offloaded>>")
_SEP = " | "
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def loads(text: str) -> Any:
    """Parse JSON keeping each object's key order (raises ValueError)."""
    return json.loads(text)


def minify(text: str) -> str | None:
    """The minified form of a JSON text, or None when the text is not JSON."""
    try:
        value = loads(text)
    except ValueError:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def same(a: Any, b: Any) -> bool:
    """JSON equality with types kept apart (``1 != 1.0 != True``); key order ignored."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _bare_ok(value: str) -> bool:
    if not value or value != value.strip() or "|" in value or _CONTROL.search(value):
        return False
    if value[0] in '"[{' or parse_any(value) is not None:
        return False
    try:
        json.loads(value)
    except ValueError:
        return True
    return False


def _cell(value: Any) -> str:
    if isinstance(value, str) and _bare_ok(value):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def to_table(value: Any) -> str | None:
    """The table form of a list of same-keyed objects with scalar values, else None."""
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        return None
    keys = list(value[0])
    if not keys or any(list(row) != keys for row in value):
        return None
    if any(isinstance(v, dict | list) for row in value for v in row.values()):
        return None
    if any(not _bare_ok(k) for k in keys):
        return None
    rows = [_SEP.join(_cell(row[k]) for k in keys) for row in value]
    return "\n".join([f"[json table: {len(value)} rows] {_SEP.join(keys)}", *rows])


def _cells(row: str) -> list[Any] | None:
    """A table row's values (JSON text or bare strings, separated by `` | ``), or None."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    pos = 0
    while True:
        if row[pos : pos + 1] in ('"', "[", "{") or row.startswith(("-", "t", "f", "n"), pos):
            try:
                value, end = decoder.raw_decode(row, pos)
            except ValueError:
                value, end = None, -1
            if end >= 0 and (end == len(row) or row.startswith(_SEP, end)):
                out.append(value)
                if end == len(row):
                    return out
                pos = end + len(_SEP)
                continue
        end = row.find(_SEP, pos)
        text = row[pos:] if end < 0 else row[pos:end]
        try:
            out.append(json.loads(text))
        except ValueError:
            out.append(text)
        if end < 0:
            return out
        pos = end + len(_SEP)


def from_table(text: str) -> tuple[list[Any], list[tuple[int, Marker]]] | None:
    """Decode `to_table`: (rows as objects, (row position, marker) of each marker row)."""
    head, _, body = text.partition("\n")
    match = TABLE_HEAD.match(head)
    if match is None:
        return None
    keys = match["keys"].split(_SEP)
    rows: list[Any] = []
    markers: list[tuple[int, Marker]] = []
    for line in body.split("\n") if body else []:
        marker = parse_any(line)
        if marker is not None:
            markers.append((len(rows), marker))
            continue
        cells = _cells(line)
        if cells is None or len(cells) != len(keys):
            return None
        rows.append(dict(zip(keys, cells, strict=True)))
    return rows, markers


def _csv_cells(line: str) -> list[tuple[bool, str]]:
    """One CSV row as (was it quoted, text) cells; a quoted "null" is a string, bare is null."""
    cells: list[tuple[bool, str]] = []
    i, n = 0, len(line)
    while True:
        if i < n and line[i] == '"':
            j, buf = i + 1, []
            while j < n:
                if line[j] == '"' and line[j + 1 : j + 2] == '"':
                    buf.append('"')
                    j += 2
                elif line[j] == '"':
                    break
                else:
                    buf.append(line[j])
                    j += 1
            cells.append((True, "".join(buf)))
            i = j + 1
        else:
            j = line.find(",", i)
            j = n if j < 0 else j
            cells.append((False, line[i:j]))
            i = j
        if i >= n:
            return cells
        i += 1  # the comma


def _csv_value(quoted: bool, text: str, kind: str) -> tuple[bool, Any]:
    if quoted:
        if kind == "json":
            try:
                return True, json.loads(text)
            except ValueError:
                return True, text
        return True, text
    if text == "":
        return False, None
    if text == "null":
        return True, None
    if kind == "bool" and text in ("true", "false"):
        return True, text == "true"
    if kind in ("int", "float", "json", "auto"):
        try:
            return True, json.loads(text)
        except ValueError:
            return True, text
    return True, text


def from_csv_schema(text: str) -> tuple[list[Any], int] | None:
    """Decode the ``[N]{col:type}`` CSV form: (rows, rows it says it dropped), or None.

    Rows that hold a newline inside a quoted cell are not supported (None: not decoded).
    """
    head, _, body = text.partition("\n")
    match = CSV_HEAD.match(head.strip())
    if match is None:
        return None
    columns = []
    for decl in match["cols"].split(",") if match["cols"] else []:
        name, colon, kind = decl.rpartition(":")
        if not colon:  # TOON's ``{a,b}``: no declared types
            name, kind = decl, "auto"
        columns.append((name.split("."), kind.rstrip("?")))
    toon = match["rest"].strip() == ":"  # TOON: ``[N]{a,b}:`` then rows indented by two
    rest = match["rest"].split()
    legends = next((int(t[7:]) for t in rest if t.startswith("__dict:")), 0)
    dropped = next((int(t[10:]) for t in rest if t.startswith("__dropped:")), 0)
    lines = body.split("\n")
    tables: dict[str, list[Any]] = {}
    for line in lines[:legends]:
        name, eq, payload = line.partition("=")
        if not eq or not name.startswith("@"):
            return None
        tables[name[1:]] = json.loads(payload)
    rows: list[Any] = []
    for line in lines[legends:]:
        if toon:
            line = line.removeprefix("  ")
        if not line and len(columns) != 1:
            continue
        record: dict[str, Any] = {}
        for (path, kind), (quoted, cell) in zip(columns, _csv_cells(line), strict=False):
            key = ".".join(path)
            if key in tables and not quoted and cell not in ("", "null"):
                present, value = True, tables[key][int(cell)]
            else:
                present, value = _csv_value(quoted, cell, kind)
            if present:
                target = record
                for part in path[:-1]:
                    target = target.setdefault(part, {})
                target[path[-1]] = value
        rows.append(record)
    if len(rows) == int(match["rows"]) + 1 and rows[-1] == {}:
        rows.pop()
    return rows, dropped


def sentinel_count(value: Any) -> int | None:
    """Items another compressor says it dropped at this array element, or None."""
    if isinstance(value, dict) and list(value) == ["_ccr_dropped"]:
        value = value["_ccr_dropped"]
    if isinstance(value, str):
        match = CCR_SENTINEL.search(value)
        if match:
            return int(match["n"])
    return None

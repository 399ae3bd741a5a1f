"""The fidelity check on JSON outputs: values compared as JSON, arrays walked item by item.

A compressed JSON output may be JSON (minified or not), a table (`to_table`), or another
compressor's ``[N]{...}`` CSV; object members are compared by key, array items by the
walk of `tokenlens.fidelity_walk`, in items.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from tokenlens.compress.toolout.jsoncodec import (
    CSV_HEAD,
    OPAQUE,
    from_csv_schema,
    from_table,
    sentinel_count,
)
from tokenlens.compress.toolout.markers import Marker, parse_any, parse_value_marker
from tokenlens.fidelity_walk import Aligner, Tally, clip


def json_key(value: Any) -> str:
    """A strict identity for a JSON value (``1``, ``1.0`` and ``true`` stay apart)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def decode_json(text: str) -> tuple[Any, list[tuple[int, Marker]], int, str] | None:
    """A compressed JSON output: (value, marker rows of a table, rows said dropped, text
    after it), or None. Text after the document (a tool's notice lines) is kept apart."""
    table = from_table(text.strip())
    if table is not None:
        return table[0], table[1], 0, ""
    value, rest = json_prefix(text)
    if value is None or CSV_HEAD.match(text.lstrip().partition("\n")[0]):
        value, rest = text.strip(), ""
    if isinstance(value, str):
        block, _, rest = value.partition("\n\n") if not rest else (value, "", rest)
        csv = from_csv_schema(block)
        if csv is None:
            return None
        return csv[0], [], csv[1], rest
    return value, [], 0, rest


def json_prefix(text: str) -> tuple[Any, str]:
    """The JSON document a text starts with and the text after it, or (None, text).

    The document must end its line (``[1] Building`` is a log line, not JSON and text)."""
    stripped = text.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return None, text
    rest = stripped[end:]
    if rest.lstrip(" \t")[:1] not in ("", "\n", "\r"):
        return None, text
    return value, rest


def check_json(v: Any, w: Any, path: str, tally: Tally) -> None:
    """Compare JSON values: changed scalars and foreign members are fabricated."""
    if json_key(v) == json_key(w):
        return
    if isinstance(v, list) and isinstance(w, str):
        decoded = decode_json(w)
        if decoded is not None and isinstance(decoded[0], list) and not decoded[3].strip():
            check_array(v, decoded[0], decoded[1], decoded[2], path, tally)
            return
    if isinstance(v, list) and isinstance(w, list):
        check_array(v, w, [], 0, path, tally)
    elif isinstance(v, dict) and isinstance(w, dict):
        for key in v:
            if key not in w:
                tally.unmarked += 1
                tally.problem(f"{path}.{key}: member removed with no marker")
            else:
                check_json(v[key], w[key], f"{path}.{key}", tally)
        for key in w:
            if key not in v:
                tally.fabricated += 1
                tally.problem(f"{path}.{key}: member not in the original")
    elif isinstance(w, str) and OPAQUE.match(w):
        tally.marked += 1  # a value replaced in place by a handle that names its kind and size
    elif isinstance(v, str) and isinstance(w, str) and parse_value_marker(w) == len(v):
        tally.marked += 1  # a long string replaced in place by a marker naming its length
    else:
        tally.fabricated += 1
        tally.problem(f"{path}: {clip(json_key(v), 40)} became {clip(json_key(w), 40)}")


def check_array(
    v: list[Any],
    w: list[Any],
    table_markers: list[tuple[int, Marker]],
    dropped: int,
    path: str,
    tally: Tally,
) -> None:
    walk = Aligner([json_key(item) for item in v], tally, "items", f"{path}: ")
    at = defaultdict(list)
    for row, marker in table_markers:
        at[row].append(marker)
    for i, item in enumerate(w):
        for marker in at.pop(i, []):
            walk.marker("table marker", marker)
        count = sentinel_count(item)
        if count is not None:
            walk.marker(clip(str(item)), Marker("items", count, foreign=True))
            continue
        found = parse_any(item) if isinstance(item, str) else None
        if found is not None:
            walk.marker(item, found)
            continue
        q = walk.find(json_key(item))
        if q is not None:
            walk.take(q)
        elif walk.expect < walk.n and isinstance(item, dict | list):
            q = walk.expect
            walk.take(q)
            check_json(v[q], item, f"{path}[{q}]", tally)
        else:
            walk.fabricated(json_key(item), i)
    for markers in at.values():
        for marker in markers:
            walk.marker("table marker", marker)
    if dropped:
        walk.marker(f"__dropped:{dropped}", Marker("items", dropped, foreign=True))
    walk.finish()

"""How numbers and arms are written for people: one place for report, dashboard and CLI.

Light on purpose (no pandas, no numpy): the proxy's dashboard imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tokenlens.compress.arms import Arm

#: What a missing figure reads as in reports and the CLI; the dashboard passes "–".
MISSING = "n/a"
#: The widest table, in characters (its cells' longest texts plus 4 per column), that a
#: narrow pane shows whole: the Prefect UI's artifact view is ~840 px wide on a 1400 px
#: screen (its sidebars take the rest) and does not wrap table cells, so a wider table
#: scrolls sideways, its last columns out of sight. Measured with
#: `bench/screenshot_artifacts.py --width 1400`: 98 fit, 135 did not.
PANE_WIDTH = 110


def _number(value: Any) -> float | None:
    """A finite-or-infinite float, or None for None/NaN/non-numbers."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def pct(value: Any, digits: int = 1, *, missing: str = MISSING) -> str:
    """A fraction as a percentage; `missing` for None/NaN (never "nan%")."""
    number = _number(value)
    if number is None:
        return missing
    return f"{100 * number:.{digits}f}%"


def level_label(level: float) -> str:
    """A bound's confidence: 0.95 -> '95%', 0.9813 -> '98.1%' (the level it was computed at)."""
    return f"{100 * level:.1f}".rstrip("0").rstrip(".") + "%"


def interval(low: Any, high: Any, digits: int = 1) -> str:
    if _number(low) is None or _number(high) is None:
        return MISSING
    return f"{pct(low, digits)}–{pct(high, digits)}"


def usd(value: float | None, *, missing: str = MISSING) -> str:
    """Dollars: four decimals below $1 (savings start small), cents above."""
    if value is None:
        return missing
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def count(value: int | None, *, missing: str = MISSING) -> str:
    """An integer with thousands separators."""
    return missing if value is None else f"{value:,}"


def plural(n: int, word: str) -> str:
    """`1 run`, `2 runs`: a count with its noun (regular plurals only)."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def arm_label(arm_key: str) -> str:
    """`prune@0.6` -> `prune r=0.6`; names that are not arms come back unchanged."""
    try:
        return Arm.parse(arm_key).label
    except ValueError:
        return arm_key


def markdown_cell(text: str) -> str:
    """A table cell: a `|` would end it, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    cell: Callable[[str], str] = markdown_cell,
    max_width: int | None = None,
) -> str:
    """A markdown table, or when it is wider than `max_width` characters a list, one item
    per row: its first cell in bold, then `column: value` pairs, which wrap in a narrow
    pane where a wide table hides its last columns (`PANE_WIDTH`)."""
    if max_width is not None and table_width(header, rows) > max_width:
        items = []
        for row in rows:
            pairs = [(k, v) for k, v in zip(header[1:], row[1:], strict=True) if v]
            items.append(
                f"- **{cell(row[0])}** — " + " · ".join(f"{cell(k)}: {cell(v)}" for k, v in pairs)
            )
        return "\n".join(items)
    lines = ["| " + " | ".join(map(cell, header)) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    lines.extend("| " + " | ".join(map(cell, row)) + " |" for row in rows)
    return "\n".join(lines)


def table_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """A table's width in characters as shown: each column's longest text, plus 4 for its
    padding and rule."""
    return sum(
        max(len(str(text)) for text in column) + 4 for column in zip(header, *rows, strict=True)
    )

"""How numbers and arms are written for people: one place for report, dashboard and CLI.

Light on purpose (no pandas, no numpy): the proxy's dashboard imports it.
"""

from __future__ import annotations

import math
from typing import Any

from tokenlens.compress.arms import Arm

#: What a missing figure reads as in reports and the CLI; the dashboard passes "–".
MISSING = "n/a"


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


def arm_label(arm_key: str) -> str:
    """`prune@0.6` -> `prune r=0.6`; names that are not arms come back unchanged."""
    try:
        return Arm.parse(arm_key).label
    except ValueError:
        return arm_key

"""How numbers and arms are written for people: one place for report, dashboard and CLI."""

from __future__ import annotations

import math
from typing import Any

from tokenlens.compress.arms import Arm


def pct(value: Any, digits: int = 1) -> str:
    """A fraction as a percentage; "n/a" for None/NaN (never "nan%")."""
    if value is None:
        return "n/a"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    if math.isnan(number):
        return "n/a"
    return f"{100 * number:.{digits}f}%"


def interval(low: Any, high: Any, digits: int = 1) -> str:
    if pct(low) == "n/a" or pct(high) == "n/a":
        return "n/a"
    return f"{pct(low, digits)}–{pct(high, digits)}"


def arm_label(arm_key: str) -> str:
    """`prune@0.6` -> `prune r=0.6`; names that are not arms come back unchanged."""
    try:
        return Arm.parse(arm_key).label
    except ValueError:
        return arm_key

"""The ladder walk: gentlest arm first, stop at the first failure.

An arm that "passes" after a failure is a lucky draw: listed as ignored, never chosen.
Arms that saved (almost) nothing, and arms with no graded pair (every call errored), are
skipped: they neither count as held nor stop the walk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: An arm saving less than this fraction of tokens on a class compressed nothing there.
MIN_REDUCTION = 0.005


@dataclass(frozen=True)
class Rung:
    """What the walk needs to know about one arm on one class."""

    arm: str
    reduction: float
    passes: bool
    rank: tuple[int, float] = (0, 0.0)
    measured: bool = True


@dataclass(frozen=True)
class Walk:
    chosen: str | None
    statuses: dict[str, str]
    ignored: tuple[str, ...]
    first_failure: str | None


def walk_ladder(rungs: Iterable[Rung], *, min_reduction: float = MIN_REDUCTION) -> Walk:
    """Gentlest first, stop at the first failure; what passes after it is ignored."""
    statuses: dict[str, str] = {}
    compressible: list[Rung] = []
    for rung in rungs:
        if not rung.measured:
            statuses[rung.arm] = "not_measured"
        elif not (rung.reduction >= min_reduction):  # NaN counts as nothing saved
            statuses[rung.arm] = "no_savings"
        else:
            compressible.append(rung)
    compressible.sort(key=lambda r: (r.reduction, r.rank, r.arm))
    chosen: str | None = None
    first_failure: str | None = None
    ignored: list[str] = []
    for rung in compressible:
        if first_failure is None:
            if rung.passes:
                statuses[rung.arm] = "held"
                chosen = rung.arm
            else:
                statuses[rung.arm] = "failed"
                first_failure = rung.arm
        elif rung.passes:
            statuses[rung.arm] = "ignored"
            ignored.append(rung.arm)
        else:
            statuses[rung.arm] = "not_reached"
    return Walk(chosen, statuses, tuple(ignored), first_failure)

"""The ladder as data: an arm is a method plus its setting, with one label everybody uses.

An external compressor is the arm ``ext:<name>`` (`tokenlens.compress.external`): no rate,
ranked after every built-in rung.

Flows, reports, the policy file and the proxy all name arms by `Arm.key` (``prune@0.6``)
and show them by `Arm.label` (``prune r=0.6``), so they always speak of the same arm.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tokenlens.compress.external import is_external

#: Methods gentlest first. `control` is not a rung: it compresses nothing and measures
#: the instrument's own noise (see tokenlens.judge).
METHODS: tuple[str, ...] = ("safe", "minify", "dedup", "prune", "select", "llmlingua2")
RATED_METHODS: frozenset[str] = frozenset({"prune", "select", "llmlingua2"})
CONTROL = "control"


@dataclass(frozen=True)
class Arm:
    """One rung at one setting. `rate` is the fraction of tokens to keep (rated rungs only)."""

    method: str
    rate: float | None = None

    def __post_init__(self) -> None:
        if is_external(self.method):
            if self.rate is not None:
                raise ValueError(f"{self.method} takes no rate, got {self.rate}")
            return
        if self.method != CONTROL and self.method not in METHODS:
            raise ValueError(
                f"unknown compression method {self.method!r} "
                f"(known: {', '.join((CONTROL, *METHODS))})"
            )
        if self.method in RATED_METHODS:
            if self.rate is None or not 0.0 < self.rate < 1.0:
                raise ValueError(f"{self.method} needs a keep rate in (0, 1), got {self.rate}")
        elif self.rate is not None:
            raise ValueError(f"{self.method} takes no rate, got {self.rate}")

    @property
    def key(self) -> str:
        """Stable machine name, e.g. ``prune@0.6``; used in files, ledger keys and policies."""
        return self.method if self.rate is None else f"{self.method}@{self.rate:g}"

    @property
    def label(self) -> str:
        """Human name, e.g. ``prune r=0.6``."""
        return self.method if self.rate is None else f"{self.method} r={self.rate:g}"

    @property
    def ladder_rank(self) -> tuple[int, float]:
        """Nominal gentleness: method order, then higher keep rate first."""
        if is_external(self.method):
            return (len(METHODS), 0.0)
        index = -1 if self.method == CONTROL else METHODS.index(self.method)
        return (index, -(self.rate if self.rate is not None else 1.0))

    @classmethod
    def parse(cls, text: str) -> Arm:
        """Parse ``prune@0.6``, ``prune:0.6``, ``prune r=0.6``, ``safe`` or ``ext:headroom``."""
        raw = text.strip()
        if is_external(raw):
            return cls(raw)
        for sep in ("@", ":", " r="):
            if sep in raw:
                method, _, rate = raw.partition(sep)
                try:
                    return cls(method.strip(), float(rate))
                except ValueError as exc:
                    raise ValueError(f"cannot parse arm {text!r}: {exc}") from exc
        return cls(raw)

    def __str__(self) -> str:
        return self.label


def build_ladder(methods: Iterable[str], rates: Iterable[float]) -> list[Arm]:
    """Every requested method at every rate it takes, gentlest first (control excluded)."""
    rate_list = sorted(set(rates), reverse=True)
    arms: list[Arm] = []
    for method in dict.fromkeys(methods):
        if method == CONTROL:
            continue
        if method in RATED_METHODS:
            arms.extend(Arm(method, rate) for rate in rate_list)
        else:
            arms.append(Arm(method))
    return sorted(arms, key=lambda arm: arm.ladder_rank)

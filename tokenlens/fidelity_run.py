"""One arm on one agent request, measured: what it saved on tool output and what it broke.

Shared by `tokenlens fidelity` and bench/bench_agent.py so both print the same figures:
estimated tokens of the tool_result blocks and of the whole body before and after, the
fidelity report (`tokenlens.fidelity.check_body`), and the CPU seconds the compression
took (this process's, plus the worker's when an external compressor runs in another
Python). The decision's rule is `refusal`: any fabricated line or unmarked drop refuses
the arm, whatever its grades.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokenlens.compress import Arm, compress_request
from tokenlens.compress.external import PREFIX, load
from tokenlens.errors import ArmUnavailable
from tokenlens.fidelity import FidelityReport, check_body, tool_outputs
from tokenlens.tokens import estimate_tokens

if TYPE_CHECKING:
    from tokenlens.facts import Fact


def tool_tokens(body: dict[str, Any]) -> int:
    """Estimated tokens of every tool_result's text in `body`."""
    return sum(estimate_tokens(out.text) for out in tool_outputs(body).values())


@dataclass
class ArmTotals:
    """One arm summed over requests."""

    arm: str
    requests: int = 0
    tool_before: int = 0
    tool_after: int = 0
    body_before: int = 0
    body_after: int = 0
    cpu_s: list[float] = field(default_factory=list)
    report: FidelityReport = field(default_factory=FidelityReport)
    unavailable: str | None = None

    @property
    def tool_reduction(self) -> float:
        return 1 - self.tool_after / self.tool_before if self.tool_before else 0.0

    @property
    def body_reduction(self) -> float:
        return 1 - self.body_after / self.body_before if self.body_before else 0.0

    @property
    def cpu_ms(self) -> float:
        """Median CPU milliseconds per request."""
        if not self.cpu_s:
            return 0.0
        ordered = sorted(self.cpu_s)
        return 1000.0 * ordered[len(ordered) // 2]

    def merged(self, other: ArmTotals) -> ArmTotals:
        """This arm's totals and `other`'s (the same arm on other requests) together."""
        return ArmTotals(
            arm=self.arm,
            requests=self.requests + other.requests,
            tool_before=self.tool_before + other.tool_before,
            tool_after=self.tool_after + other.tool_after,
            body_before=self.body_before + other.body_before,
            body_after=self.body_after + other.body_after,
            cpu_s=self.cpu_s + other.cpu_s,
            report=self.report + other.report,
            unavailable=self.unavailable or other.unavailable,
        )

    def add(
        self, body: dict[str, Any], compressed: dict[str, Any], cpu_s: float, report: FidelityReport
    ) -> None:
        from tokenlens.compress.result import body_tokens

        self.requests += 1
        self.tool_before += tool_tokens(body)
        self.tool_after += tool_tokens(compressed)
        self.body_before += body_tokens(body)
        self.body_after += body_tokens(compressed)
        self.cpu_s.append(cpu_s)
        self.report += report


def refusal(report: FidelityReport) -> str | None:
    """Why the decision refuses an arm on fidelity alone, or None (grades then decide)."""
    if report.faithful:
        return None
    parts = []
    if report.fabricated_lines:
        parts.append(f"{report.fabricated_lines} fabricated lines")
    if report.unmarked_drops:
        parts.append(f"{report.unmarked_drops} unmarked drops")
    return "refused: compressed tool output has " + " and ".join(parts)


def run_arm(arm: Arm, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Compress `body` with `arm`; (compressed body, CPU seconds including a worker's)."""
    started = time.process_time()
    result = compress_request(body, arm)
    cpu = time.process_time() - started
    if arm.method.startswith(PREFIX):
        worker = getattr(load(arm.method[len(PREFIX) :]), "last_cpu_s", None)
        cpu += worker or 0.0
    return result.body, cpu


def measure(
    arms: Sequence[Arm], requests: Iterable[tuple[dict[str, Any], Sequence[Fact]]]
) -> list[ArmTotals]:
    """Every arm on every (body, facts) request; an arm that cannot run says why."""
    totals = {arm.key: ArmTotals(arm.key) for arm in arms}
    for body, facts in requests:
        for arm in arms:
            row = totals[arm.key]
            if row.unavailable:
                continue
            try:
                compressed, cpu = run_arm(arm, body)
            except ArmUnavailable as exc:
                row.unavailable = str(exc)
                continue
            row.add(body, compressed, cpu, check_body(body, compressed, facts))
    return list(totals.values())


HEADER = (
    f"{'arm':<22}{'reqs':>5}{'tool tok':>10}{'tool red':>9}{'body red':>9}"
    f"{'fabric.':>8}{'unmarked':>9}{'facts lost':>11}{'cpu ms':>8}  verdict"
)


def table_row(row: ArmTotals, label: str | None = None) -> str:
    """One printed row of the shared table."""
    name = label or row.arm
    if row.unavailable:
        return f"{name:<22}  unavailable: {row.unavailable}"
    rep = row.report
    verdict = refusal(rep) or "faithful"
    return (
        f"{name:<22}{row.requests:>5}{row.tool_before:>10}{row.tool_reduction:>9.1%}"
        f"{row.body_reduction:>9.1%}{rep.fabricated_lines:>8}{rep.unmarked_drops:>9}"
        f"{rep.facts_lost:>11}{row.cpu_ms:>8.1f}  {verdict}"
    )

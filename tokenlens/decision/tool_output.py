"""Per-kind tool-output arms from the agent set: the gentlest-first walk, graded by facts.

Why no judge: an agent task's facts are exact (computed from the output), so whether a
compressed tool output still holds them is a count, with no noise floor. The walk is the
class rule's: from the gentlest rung, stop at the first one that fails on any task, and
keep the one before. A rung fails with any fabricated line, any unmarked drop (the
fidelity check's refusal) or any fact lost. The kept rung is ✓ with at least
`MIN_TASKS` tasks of the kind behind it, ? with fewer, — when even `lossless` failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenlens.compress.toolout.plugin import ToolArmCompressor
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.facts import Fact
from tokenlens.fidelity import FidelityReport, check_body, tool_outputs
from tokenlens.policy import PolicyEntry
from tokenlens.tokens import estimate_tokens

#: The rungs walked, gentlest first.
TOOL_RUNGS: tuple[str, ...] = (
    "lossless",
    "elide@0.9",
    "elide@0.8",
    "elide@0.7",
    "elide@0.6",
    "elide@0.5",
    "elide@0.3",
)
#: Tasks of a kind for a ✓ (fewer: ?).
MIN_TASKS = 20
Request = tuple[dict[str, Any], Sequence[Fact]]


@dataclass(frozen=True)
class RungResult:
    """One rung on every request of one kind."""

    rung: str
    tasks: int
    report: FidelityReport
    tokens_before: int
    tokens_after: int

    @property
    def reduction(self) -> float:
        return 1 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0

    @property
    def holds(self) -> bool:
        return self.report.faithful and self.report.facts_lost == 0


def kind_of_class(task_class: str) -> str:
    """``agent-search`` -> ``search`` (the agent set's classes name the kinds)."""
    return task_class.removeprefix("agent-")


def grade_rung(rung: str, requests: Sequence[Request]) -> RungResult:
    compress = ToolArmCompressor(ToolArm.parse(rung))
    report = FidelityReport()
    before = after = 0
    for body, facts in requests:
        out = compress(body)
        report += check_body(body, out, facts)
        before += sum(estimate_tokens(o.text) for o in tool_outputs(body).values())
        after += sum(estimate_tokens(o.text) for o in tool_outputs(out).values())
    return RungResult(rung, len(requests), report, before, after)


def walk(requests: Sequence[Request], rungs: Sequence[str] = TOOL_RUNGS) -> list[RungResult]:
    """Grade rungs gentlest first, up to and including the first that fails."""
    results = []
    for rung in rungs:
        result = grade_rung(rung, requests)
        results.append(result)
        if not result.holds:
            break
    return results


def entry_for(kind: str, results: Sequence[RungResult], min_tasks: int = MIN_TASKS) -> PolicyEntry:
    """The policy entry of a kind from its walk."""
    held = [r for r in results if r.holds]
    failed = next((r for r in results if not r.holds), None)
    stop = (
        f"; {failed.rung} lost {failed.report.facts_lost} facts, "
        f"{failed.report.fabricated_lines} fabricated, {failed.report.unmarked_drops} unmarked"
        if failed
        else ""
    )
    if not held:
        return PolicyEntry(
            task_class=kind,
            verdict="none",
            reason=f"no tool-output rung held on {results[0].tasks if results else 0} tasks{stop}",
            n_tasks=results[0].tasks if results else 0,
        )
    best = held[-1]
    arm = ToolArm.parse(best.rung)
    return PolicyEntry(
        task_class=kind,
        verdict="measured" if best.tasks >= min_tasks else "provisional",
        method=arm.method,
        rate=arm.rate,
        reduction_pct=round(100 * best.reduction, 1),
        n_tasks=best.tasks,
        reason=f"{best.rung}: every fact of {best.tasks} tasks kept, 0 fabricated, "
        f"0 unmarked{stop}",
    )


def decide_tool_output(
    by_kind: Mapping[str, Sequence[Request]],
    rungs: Sequence[str] = TOOL_RUNGS,
    min_tasks: int = MIN_TASKS,
) -> tuple[dict[str, PolicyEntry], dict[str, list[RungResult]]]:
    """Each kind's entry, and the walks behind them (for the printed table)."""
    walks = {kind: walk(requests, rungs) for kind, requests in sorted(by_kind.items())}
    entries = {kind: entry_for(kind, results, min_tasks) for kind, results in walks.items()}
    return entries, walks

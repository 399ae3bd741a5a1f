"""The model-free pre-check of the per-kind tool-output arms (`tokenlens tool-policy`).

A calibration decides the per-kind arms from answers it pays for and grades
(`tokenlens.decision.tool_kinds`). This is the check that needs no model: an agent task's
facts are exact (computed from the output), so whether a compressed tool output still
holds them is a count. Each rung is graded on every task of a kind, and the class rule's
walk (`tokenlens.decision.ladder.walk_ladder`: the gentlest rung first, stop at the first
that fails) picks the rung. A rung fails with any fabricated line, any unmarked drop (the
fidelity check's refusal) or any fact lost. The kept rung is ✓ with at least `MIN_TASKS`
tasks of the kind behind it, ? with fewer, — when even the gentlest failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenlens.compress.toolout.kinds import tool_output_kind
from tokenlens.compress.toolout.plugin import ToolArmCompressor, ToolArmsCompressor
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.config import DEFAULT_TOOL_RUNGS
from tokenlens.decision.ladder import Rung, walk_ladder
from tokenlens.facts import Fact
from tokenlens.fidelity import FidelityReport, check_body, tool_outputs
from tokenlens.policy import PolicyEntry
from tokenlens.tokens import estimate_tokens

#: The rungs walked, gentlest first (the calibration's default tool rungs).
TOOL_RUNGS: tuple[str, ...] = DEFAULT_TOOL_RUNGS
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


def block_kinds(body: dict[str, Any]) -> dict[str, str]:
    """The kind of each tool_result of `body` (by tool_use_id), as the proxy reads it."""
    calls: dict[str, dict[str, Any]] = {}
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                calls[str(block.get("id"))] = block
    return {
        use_id: tool_output_kind(out.text, calls.get(use_id))
        for use_id, out in tool_outputs(body).items()
    }


def by_block_kind(requests: Sequence[Request]) -> dict[str, list[Request]]:
    """Requests grouped by the kinds of their tool outputs (a request with a listing and
    a file read is in both groups): the groups the proxy applies the arms to."""
    groups: dict[str, list[Request]] = {}
    for request in requests:
        for kind in dict.fromkeys(block_kinds(request[0]).values()):
            groups.setdefault(kind, []).append(request)
    return groups


def grade_rung(rung: str, requests: Sequence[Request], kind: str | None = None) -> RungResult:
    """One rung on `requests`; with `kind`, on that kind's tool outputs only (the others
    are left as they came, and the tokens counted are that kind's)."""
    arm = ToolArm.parse(rung)
    compress = ToolArmsCompressor({kind: arm}) if kind else ToolArmCompressor(arm)
    report = FidelityReport()
    before = after = 0
    for body, facts in requests:
        out = compress(body)
        report += check_body(body, out, facts)
        kinds = block_kinds(body) if kind else {}
        before += sum(
            estimate_tokens(o.text)
            for key, o in tool_outputs(body).items()
            if not kind or kinds[key] == kind
        )
        after += sum(
            estimate_tokens(o.text)
            for key, o in tool_outputs(out).items()
            if not kind or kinds.get(key) == kind
        )
    return RungResult(rung, len(requests), report, before, after)


def walk(
    requests: Sequence[Request], rungs: Sequence[str] = TOOL_RUNGS, kind: str | None = None
) -> list[RungResult]:
    """Grade rungs gentlest first, up to and including the first that fails."""
    results = []
    for rung in rungs:
        result = grade_rung(rung, requests, kind)
        results.append(result)
        if not result.holds:
            break
    return results


def entry_for(kind: str, results: Sequence[RungResult], min_tasks: int = MIN_TASKS) -> PolicyEntry:
    """The policy entry of a kind from its graded rungs, chosen by the class rule's walk."""
    steps = walk_ladder(
        Rung(r.rung, r.reduction, r.holds, (0, float(i))) for i, r in enumerate(results)
    )
    failed = next((r for r in results if r.rung == steps.first_failure), None)
    stop = (
        f"; {failed.rung} lost {failed.report.facts_lost} facts, "
        f"{failed.report.fabricated_lines} fabricated, {failed.report.unmarked_drops} unmarked"
        if failed
        else ""
    )
    tasks = results[0].tasks if results else 0
    if steps.chosen is None:
        return PolicyEntry(
            task_class=kind,
            verdict="none",
            reason=f"no tool-output rung held on {tasks} tasks{stop}",
            cause="no_arm_held" if failed else "nothing_compressible",
            n_tasks=tasks,
        )
    best = next(r for r in results if r.rung == steps.chosen)
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
    """Each kind's entry, and the walks behind them (for the printed table). Each kind's
    rungs touch only that kind's tool outputs, as the proxy applies them."""
    walks = {kind: walk(requests, rungs, kind) for kind, requests in sorted(by_kind.items())}
    entries = {kind: entry_for(kind, results, min_tasks) for kind, results in walks.items()}
    return entries, walks

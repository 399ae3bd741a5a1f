"""Per-kind tool-output arms decided by a calibration, from its tool rungs' graded pairs.

A calibration whose tasks hold tool results grades the tool-output rungs as the plug-in
arms ``ext:tools-<rung>`` (``ext:tools-lossless``, ``ext:tools-elide@0.7``): paid, graded
(the fact grader on agent tasks) and checked for fidelity like any arm. Their rows are
not walked with a class's text ladder, because the proxy never applies them as a class's
arm: it gives each tool_result the arm of its *kind*, beside the class's text arm.

So each task is filed under the kind of the tool output its facts were read from, as the
proxy's per-block classifier (`tokenlens.compress.toolout.kinds.tool_output_kind`) sees
that block: a kind's entry rests on the outputs the proxy will give that entry's arm.
On the agent set that is the class's own kind (``agent-search`` -> ``search``; the logs
read with ``sed``, ``tail`` or ``zcat … | head`` are ``log`` too). A task whose facts sit
in outputs of two kinds counts for neither; one without located facts takes the kind of
its tool outputs when they share one, else its class's name (``agent-<kind>``) when that is a kind.

Then the class rules run over kinds (`tokenlens.decision.curve.aggregate` with the kinds
as classes): the control's noise floor, the one-sided retention bound against the
tolerance, the minimum evidence for ? and ✓, and the walk from the gentlest rung that
stops at the first failure, where a rung that fabricated a line, dropped one without a
marker or lost a fact on any task is refused as a defect. A kind no task was filed under
gets no entry, and the proxy leaves its outputs as they came.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tokenlens.compress.arms import CONTROL
from tokenlens.compress.external import PREFIX, TOOL_PREFIX
from tokenlens.compress.toolout.kinds import KINDS, tool_output_kind
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.fidelity import tool_outputs
from tokenlens.policy import PolicyEntry
from tokenlens.tasks import CalibrationTask

if TYPE_CHECKING:
    import pandas as pd

    from tokenlens.decision.curve import Curve
    from tokenlens.decision.grades import Mode

#: How a tool rung is named as an arm of a calibration.
TOOL_ARM_PREFIX = PREFIX + TOOL_PREFIX


def tool_arm_key(rung: str) -> str:
    """``elide@0.7`` -> ``ext:tools-elide@0.7``."""
    return TOOL_ARM_PREFIX + ToolArm.parse(rung).key


def is_tool_arm(arm: str) -> bool:
    return arm.startswith(TOOL_ARM_PREFIX)


def tool_arm_of(arm: str) -> ToolArm:
    """``ext:tools-elide@0.7`` -> ``ToolArm("elide", 0.7)``."""
    return ToolArm.parse(arm.removeprefix(TOOL_ARM_PREFIX))


def _calls(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found[str(block.get("id"))] = block
    return found


def task_kind(task: CalibrationTask) -> str | None:
    """The kind of tool output a task's facts were read from (see the module docstring)."""
    if task.body is None:
        return None
    outputs = tool_outputs(task.body)
    if not outputs:
        return None
    calls = _calls(task.body)
    sources = {fact.source for fact in task.facts if fact.source in outputs}
    kinds = {tool_output_kind(outputs[use].text, calls.get(use)) for use in sources or set(outputs)}
    if len(kinds) == 1:
        return kinds.pop()
    if sources:
        return None  # facts in outputs of two kinds: evidence for neither alone
    named = task.task_class.removeprefix("agent-")
    return named if named in KINDS else None


def task_kinds(tasks: Iterable[CalibrationTask]) -> dict[str, str]:
    """Task id -> kind, for the tasks that have one."""
    return {task.id: kind for task in tasks if (kind := task_kind(task)) is not None}


def tool_curve(
    grades: pd.DataFrame,
    kinds: Mapping[str, str],
    *,
    tolerance: float,
    mode: Mode,
    judge: str | None,
    seed: int = 0,
) -> Curve | None:
    """The curve over kinds: the control and tool-rung rows of the tasks with a kind, each
    under its kind. None when the grades hold no tool rung."""
    from tokenlens.decision.curve import aggregate

    arms = grades["arm"].astype(str)
    if not arms.map(is_tool_arm).any():
        return None
    keep = (arms.map(is_tool_arm) | (arms == CONTROL)) & grades["task_id"].isin(set(kinds))
    rows = grades[keep].copy()
    rows["task_class"] = rows["task_id"].map(kinds)
    return aggregate(
        rows,
        tolerance=tolerance,
        mode=mode,
        judge=judge,
        seed=seed,
        pooled=False,
        refuse_lost_facts=True,
    )


def tool_entries(curve: Curve) -> dict[str, PolicyEntry]:
    """A `Policy.tool_output` entry per kind of the curve: the verdict of its walk, with the
    chosen rung as a tool-output arm (method ``lossless`` or ``elide``)."""
    from tokenlens.decision.verdicts import entry_of

    entries: dict[str, PolicyEntry] = {}
    for kind in curve.classes():
        entry = entry_of(kind, curve.rows(kind), curve)
        if entry.method != "none":
            arm = tool_arm_of(entry.method)
            entry = entry.model_copy(update={"method": arm.method, "rate": arm.rate})
        entries[kind] = entry
    return entries


def decide_tool_kinds(
    grades: pd.DataFrame,
    tasks: Sequence[CalibrationTask],
    *,
    tolerance: float,
    mode: Mode,
    judge: str | None,
    seed: int = 0,
) -> tuple[dict[str, PolicyEntry], Curve | None]:
    """The policy's `tool_output` entries from a calibration's grades, and the curve over
    kinds behind them (None, and no entries, when the run graded no tool rung)."""
    curve = tool_curve(
        grades, task_kinds(tasks), tolerance=tolerance, mode=mode, judge=judge, seed=seed
    )
    return ({} if curve is None else tool_entries(curve)), curve


def without_tool_arms(grades: pd.DataFrame, keep: Iterable[str] = ()) -> pd.DataFrame:
    """The grades a class's own walk reads: every arm but the tool rungs. A tool arm named
    in `keep` (the run's `methods`: the user put it on the class's own ladder, as the
    offline default scope does) stays."""
    kept = set(keep)
    arms = grades["arm"].astype(str)
    return grades[~arms.map(is_tool_arm) | arms.isin(kept)]


def only_tool_rungs(grades: pd.DataFrame, class_arms: Iterable[str]) -> pd.DataFrame:
    """The grades the per-kind walk reads: without the tool arms that are a class's own
    (`without_tool_arms`' `keep`), which the class's walk decides."""
    return grades[~grades["arm"].astype(str).isin(set(class_arms))]

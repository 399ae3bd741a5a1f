"""Stages 4 and 5, aggregate and publish: grades -> curve -> policy and report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenlens import tables
from tokenlens.calibration.context import Calibration, judge_name_for, judge_names
from tokenlens.storage import Location, location
from tokenlens.tables import GradeRow
from tokenlens.tasks import CalibrationTask

if TYPE_CHECKING:
    from tokenlens.decision import Curve
    from tokenlens.policy import Policy


def aggregate_stage(cal: Calibration, grades: list[GradeRow]) -> Curve:
    """Grades -> the per-class curve of the deciding judge (written as `curve`).

    The tool-output rungs are walked per kind of tool output, not per class
    (`tokenlens.decision.tool_kinds`): `publish_stage` decides them."""
    import pandas as pd

    from tokenlens.decision import aggregate
    from tokenlens.decision.tool_kinds import without_tool_arms

    df = pd.DataFrame(grades, columns=tables.GRADES.names)
    curve = aggregate(
        without_tool_arms(df, keep=class_tool_arms(cal)),
        tolerance=cal.config.tolerance,
        mode=cal.config.mode,
        judge=judge_name_for(cal.config, cal.model),
        seed=cal.config.seed,
    )
    cal.store.write_table("curve", curve.to_arrow())
    return curve


@dataclass(frozen=True)
class Published:
    policy: Policy
    #: Paths or URLs (the reports root may be ``s3://...``).
    policy_path: str
    report_path: str
    exit_code: int
    #: The run's report as markdown, its plot (PNG) and the name the markdown links it by,
    #: for the Prefect artifacts (as written: not read back from the store).
    markdown: str | None = None
    plot_png: bytes = b""
    plot_name: str = ""
    unresolved: tuple[str, ...] = ()


def run_reports_dir(reports: str | Path | Location, run_id: str) -> Location:
    """Where one run's policy and report live: `<reports>/runs/<run-id>/`."""
    return location(reports).child("runs", run_id)


def class_tool_arms(cal: Calibration) -> list[str]:
    """The tool-output arms on the class's own ladder (in `methods`, not in `tool_rungs`):
    the class's walk decides them, not the per-kind walk."""
    from tokenlens.compress.arms import build_ladder
    from tokenlens.decision.tool_kinds import is_tool_arm, tool_arm_key

    rungs = {tool_arm_key(rung) for rung in cal.config.tool_rungs or ()}
    ladder = build_ladder(cal.config.methods, cal.config.rates)
    return [arm.key for arm in ladder if is_tool_arm(arm.key) and arm.key not in rungs]


def with_tool_output(
    cal: Calibration, policy: Policy, grades: list[GradeRow], tasks: list[CalibrationTask]
) -> Policy:
    """`policy` with the per-kind tool-output entries this run's tool rungs earned (written
    as the `tool_curve` table when the run graded any)."""
    import pandas as pd

    from tokenlens.decision.tool_kinds import decide_tool_kinds, only_tool_rungs

    entries, curve = decide_tool_kinds(
        only_tool_rungs(pd.DataFrame(grades, columns=tables.GRADES.names), class_tool_arms(cal)),
        tasks,
        tolerance=cal.config.tolerance,
        mode=cal.config.mode,
        judge=judge_name_for(cal.config, cal.model),
        seed=cal.config.seed,
    )
    if curve is None:
        return policy
    cal.store.write_table("tool_curve", curve.to_arrow())
    return policy.model_copy(update={"tool_output": entries})


def publish_stage(
    cal: Calibration,
    curve: Curve,
    grades: list[GradeRow],
    requested: list[str] | None,
    unavailable: dict[str, str] | None = None,
    tasks: list[CalibrationTask] | None = None,
    *,
    notes: list[str] | None = None,
) -> Published:
    """Decide; write the run's policy and report under `<reports>/runs/<run-id>/`, then
    publish the policy as `<reports>/policy/<calibration-id>.json` and `latest.json`.

    Every run keeps its own files, so an older run's report never shows a newer run.
    With the run's `tasks`, the policy is routed by the class the proxy will *predict*
    (`tokenlens.decision.applied`) and the report shows the policy as applied; `notes` are
    more lines of the report's summary (what re-answering did).
    """
    import pandas as pd

    from tokenlens.calibration.carry import with_carry_over
    from tokenlens.calibration.judging import grader_lines
    from tokenlens.decision import decide, exit_code, judge_agreement, unresolved_classes
    from tokenlens.decision.tool_kinds import without_tool_arms
    from tokenlens.policy import write_policy
    from tokenlens.report import write_report

    policy = decide(
        curve,
        calibration_id=cal.calibration_id or cal.store.run_id,
        model=cal.model,
        requested_classes=requested,
    ).model_copy(update={"run_id": cal.store.run_id, "backend": cal.backend})
    applied: list[Any] = []
    if tasks:
        from tokenlens.decision.applied import applied_retention, route_policy

        routing = route_policy(policy, curve, tasks)
        policy = routing.policy
        applied = applied_retention(
            pd.DataFrame(grades, columns=tables.GRADES.names),
            policy,
            routing.labels,
            judge=judge_name_for(cal.config, cal.model),
        )
    policy = with_carry_over(with_tool_output(cal, policy, grades, tasks or []), cal.config)
    run_folder = run_reports_dir(cal.config.reports, cal.store.run_id)
    agreement = None
    judges = judge_names(cal.config, cal.model)
    if len(judges) == 2:
        deciding = judge_name_for(cal.config, cal.model)
        other = next(name for name in judges if name != deciding)
        agreement = judge_agreement(
            without_tool_arms(
                pd.DataFrame(grades, columns=tables.GRADES.names), keep=class_tool_arms(cal)
            ),
            judges=(deciding, other),
            tolerance=cal.config.tolerance,
            mode=cal.config.mode,
        )
    paths = write_report(
        policy,
        curve,
        run_folder,
        agreement=agreement,
        local_model=cal.backend == "local",
        unavailable=unavailable,
        applied=applied,
        graders=[*grader_lines(cal.config, cal.model, tasks or []), *(notes or [])],
    )
    run_policy = run_folder.child("policy.json")
    run_policy.write_text(policy.model_dump_json(indent=2) + "\n")
    write_policy(policy, location(cal.config.reports).child("policy"))
    return Published(
        policy,
        run_policy.url,
        paths.html.url,
        exit_code(policy, requested),
        markdown=paths.pane_text,  # the Prefect UI's narrow artifact pane
        plot_png=paths.png,
        plot_name=paths.plot.name,
        unresolved=tuple(unresolved_classes(policy, requested)),
    )

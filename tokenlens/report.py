"""The human report of a calibration: markdown, a self-contained HTML page and a plot.

It prints what the policy decided and why: the seed-style one-liners, the per-class
table, every arm of the curve with its error bar, the noise floors, the arms ignored
after a failure, and (when two judges ran) how far they agreed. The HTML page comes from
an autoescaped Jinja2 template (`templates/report.html.j2`). The plot is
`tokenlens.plot`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import ALL_CLASSES, Curve, JudgeAgreement
from tokenlens.decision.applied import AppliedRetention
from tokenlens.decision.carryover import carried_note
from tokenlens.formatting import PANE_WIDTH, level_label, markdown_cell, markdown_table
from tokenlens.formatting import arm_label as _label
from tokenlens.formatting import interval as _interval
from tokenlens.formatting import pct as _pct
from tokenlens.plot import plot_images
from tokenlens.policy import Interval, Policy, PolicyEntry
from tokenlens.storage import Location, location
from tokenlens.templating import render

LOCAL_MODEL_BANNER = (
    "Offline numbers describe the instrument on a tiny local model, not Claude. "
    "They show that the harness works, not what compression costs on your traffic."
)

_RULE_WORDS = {
    "interval": "the one-sided 95% bound of pooled retention must reach the tolerance",
    "mean": "the capped mean must clear tolerance − noise floor: the seed's rule",
}


@dataclass(frozen=True)
class ReportPaths:
    """Where the report went (local files or objects of a store URL, `tokenlens.storage`),
    and the markdown and plot written there, so a caller need not read them back."""

    markdown: Location
    html: Location
    plot: Location
    markdown_text: str
    png: bytes
    #: The same report for a narrow pane (the Prefect UI's artifact view): wide tables as
    #: lists (`tokenlens.formatting.markdown_table`).
    pane_text: str


def _arm_text(entry: PolicyEntry) -> str:
    if entry.method == "none":
        return "none"
    return entry.method if entry.rate is None else f"{entry.method} rate={entry.rate:g}"


def seed_lines(policy: Policy) -> list[str]:
    """One line per class (and default), e.g.
    ``✓ extraction  llmlingua2 rate=0.8  14.9% smaller at 99.8% quality``, then one per
    kind of tool output the policy has an entry for."""
    entries = [*policy.classes.values(), policy.default]
    width = max(len(e.task_class) for e in entries) + 2
    lines: list[str] = []
    for entry in entries:
        head = f"{entry.mark} {entry.task_class:<{width}}"
        if entry.verdict == "none":
            lines.append(f"{head}none — {entry.reason}")
            continue
        lines.append(
            f"{head}{_arm_text(entry)}  {entry.reduction_pct or 0.0:.1f}% smaller at "
            f"{_pct(entry.retention_mean)} quality"
        )
        if entry.verdict == "provisional" and entry.carried_over is None:
            # the reason's first clause says why it is only a ? (noise floor, or tasks); a
            # carried entry's reason is the carry, which its own line below says
            lines.append(" " * (width + 2) + entry.reason.split("; ")[0])
        if entry.ignored_arms:
            ignored = ", ".join(_label(a) for a in entry.ignored_arms)
            lines.append(" " * (width + 2) + f"ignored after the first failure: {ignored}")
        if entry.carried_over is not None:
            lines.append(" " * (width + 2) + carried_note(entry))
    for kind, entry in policy.tool_output.items():  # per kind of tool output
        head = f"{entry.mark} tool output: {kind}  "
        if entry.verdict == "none":
            lines.append(f"{head}none — {entry.reason}")
        else:
            lines.append(
                f"{head}{_arm_text(entry)}  {entry.reduction_pct or 0.0:.1f}% smaller at "
                f"{_pct(entry.retention_mean)} quality"
            )
    return lines


def policy_markdown(lines: Sequence[str]) -> list[str]:
    """`seed_lines` as a markdown list, one item per class, its indented continuation
    lines joined to it: a code block would not wrap and is cut off in a narrow pane (the
    Prefect UI's artifact view at 1400 px)."""
    items: list[str] = []
    for line in lines:
        if line.startswith(" ") and items:
            items[-1] += " — " + line.strip()
        else:
            items.append(" ".join(line.split()))
    return [f"- {markdown_cell(item)}" for item in items]


def _bounds(interval: Interval | None) -> str:
    """The interval, with its level when a sequential look computed it at another."""
    if interval is None:
        return "n/a"
    text = _interval(interval.low, interval.high)
    level = interval.confidence
    if level is not None and abs(level - 0.95) > 1e-9:
        text += f" (at {level_label(level)})"
    return text


def _people(entry: PolicyEntry) -> str:
    """Retention corrected by people's grades, beside the judge's (when a review has it)."""
    if entry.people_retention is None:
        return "n/a"
    text = _pct(entry.people_retention)
    if entry.people_interval is not None:
        text += f" ({_bounds(entry.people_interval)})"
    return f"{text}, {entry.people_pairs} reviewed pairs"


def _class_table(policy: Policy) -> tuple[list[str], list[list[str]]]:
    header = [
        "class",
        "verdict",
        "arm",
        "reduction",
        "retention",
        "one-sided bounds (95% unless said)",
        "worst task",
        "noise floor",
        "bar",
        "tasks / pairs",
        "ignored arms",
        "reason",
    ]
    tools = [  # per kind of tool output, after the classes
        entry.model_copy(update={"task_class": f"tool output: {kind}"})
        for kind, entry in policy.tool_output.items()
    ]
    entries = [*policy.classes.values(), policy.default, *tools]
    reviewed = any(e.people_retention is not None for e in entries)
    if reviewed:
        header.insert(6, "retention by people (95% bounds)")
    rows = []
    for entry in entries:
        floor = _pct(entry.noise_floor)
        if entry.noise_floor_interval is not None:
            floor += (
                f" ({_interval(entry.noise_floor_interval.low, entry.noise_floor_interval.high)})"
            )
        interval = entry.retention_interval
        rows.append(
            [
                entry.task_class,
                f"{entry.mark} {entry.verdict}",
                _arm_text(entry),
                "n/a" if entry.reduction_pct is None else f"{entry.reduction_pct:.1f}%",
                _pct(entry.retention_mean),
                _bounds(interval),
                *([_people(entry)] if reviewed else []),
                _pct(entry.worst_case),
                floor,
                _pct(entry.bar),
                f"{entry.n_tasks} / {entry.n_pairs}",
                ", ".join(_label(a) for a in entry.ignored_arms) or "—",
                entry.reason,
            ]
        )
    return header, rows


def _curve_table(curve: Curve) -> tuple[list[str], list[list[str]]]:
    """Classes in curve order (all classes last), arms in ladder order, the status third:
    the Prefect UI hides a wide table's last columns behind a sideways scroll."""
    header = [
        "class",
        "arm",
        "status",
        "reduction",
        "retention [95% bounds]",
        "per-pair mean",
        "worst task",
        "tasks / pairs",
        "errors / broken / set aside",
        "fabricated / unmarked / facts lost",
    ]
    rows = []
    order = {name: i for i, name in enumerate([*curve.classes(), ALL_CLASSES])}
    table = curve.table.assign(
        _class=curve.table["task_class"].map(lambda c: order.get(c, len(order))),
        _rank=curve.table["arm"].map(lambda a: Arm.parse(str(a)).ladder_rank),
    ).sort_values(["_class", "_rank"], kind="stable")
    table = table.assign(status=table["status"].str.replace("_", " "))
    for r in table.itertuples(index=False):
        name = "all classes" if r.task_class == ALL_CLASSES else str(r.task_class)
        rows.append(
            [
                name,
                _label(str(r.arm)),
                str(r.status),
                _pct(r.reduction),
                f"{_pct(r.retention)} [{_interval(r.retention_low, r.retention_high)}]",
                _pct(r.retention_mean),
                _pct(r.worst_case),
                f"{r.n_tasks} / {r.n_pairs}",
                f"{r.n_errors} / {r.n_broken} / {_count(r.n_set_aside)}",
                " / ".join(
                    _count(getattr(r, col, None))
                    for col in ("fabricated_lines", "unmarked_drops", "facts_lost")
                ),
            ]
        )
    return header, rows


def _count(value: float | None) -> str:
    """A count that may be null (the control's row, or a curve written before it)."""
    return "–" if value is None or math.isnan(value) else str(int(value))


def _floor_table(curve: Curve) -> tuple[list[str], list[list[str]]]:
    header = ["class", "control retention", "noise floor (95%)", "judge share", "sampling share"]
    control = curve.table[curve.table["arm"] == CONTROL]
    rows = []
    for r in control.itertuples(index=False):
        name = "all classes" if r.task_class == ALL_CLASSES else str(r.task_class)
        rows.append(
            [
                name,
                _pct(r.retention_mean),
                f"{_pct(r.noise_floor)} ({_interval(r.noise_floor_low, r.noise_floor_high)})",
                _pct(r.floor_judge),
                _pct(r.floor_sampling),
            ]
        )
    return header, rows


APPLIED_WORDS = (
    "What the proxy will actually do to each true class: every task is served as the class "
    "its request is classified as (cross-validated), gets that entry's arm, and keeps its "
    "own measured retention under it (100 % when it gets no arm). Read from pairs already "
    "paid for; bounds are one-sided 95 %."
)


def _applied_table(rows: Sequence[AppliedRetention]) -> tuple[list[str], list[list[str]]]:
    header = ["true class", "tasks", "served as another class", "retention as applied", "note"]
    body = [
        [
            r.task_class,
            str(r.n_tasks),
            _pct(r.routed_elsewhere, 0),
            "n/a" if r.retention is None else f"{_pct(r.retention)} [{_interval(r.low, r.high)}]",
            r.note,
        ]
        for r in rows
    ]
    return header, body


def _agreement_lines(agreement: JudgeAgreement) -> list[str]:
    a, b = agreement.judges
    rho = agreement.spearman_retention
    lines = [
        f"Judges compared: {a} and {b}, on {agreement.n_pairs} pairs.",
        "Rank correlation (Spearman) of per-pair retention: "
        + ("n/a" if math.isnan(rho) else f"{rho:.2f}"),
        f"Pairs where one judge passes the tolerance and the other does not: "
        f"{_pct(agreement.pair_disagreement)}",
        f"Class × arm cells where the decision rule differs: {_pct(agreement.cell_disagreement)} "
        f"of {agreement.n_cells}",
    ]
    for task_class, arm, pass_a, pass_b in agreement.disagreements:
        lines.append(
            f"{task_class} {_label(arm)}: {a} {'passes' if pass_a else 'fails'}, "
            f"{b} {'passes' if pass_b else 'fails'}"
        )
    return lines


# --------------------------------------------------------------------------- render


def _summary(policy: Policy, curve: Curve, graders: Sequence[str] = ()) -> list[str]:
    return [
        f"Calibration {policy.calibration_id}, created {policy.created.isoformat()}",
        f"Answer model: {policy.model}; judge: {policy.judge}; tolerance "
        f"{_pct(policy.tolerance)}; decision mode: {policy.mode} "
        f"({_RULE_WORDS[policy.mode]}); "
        f"intervals: {curve.interval_method}, clustered by task.",
        *graders,
    ]


def render_markdown(
    policy: Policy,
    curve: Curve,
    *,
    plot_name: str,
    agreement: JudgeAgreement | None = None,
    local_model: bool = False,
    unavailable: Mapping[str, str] | None = None,
    applied: Sequence[AppliedRetention] = (),
    max_width: int | None = None,
    graders: Sequence[str] = (),
) -> str:
    """The report as markdown; `max_width` turns wider tables into lists (for a narrow
    pane, `markdown_table`)."""

    def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        return markdown_table(header, rows, max_width=max_width)

    parts = ["# TokenLens calibration report", ""]
    if local_model:
        parts += [f"> **{LOCAL_MODEL_BANNER}**", ""]
    parts += [*_summary(policy, curve, graders), ""]
    parts += ["## Policy", "", *policy_markdown(seed_lines(policy)), ""]
    if unavailable:
        parts += ["## Not measured", ""]
        parts += [f"- `{arm}` was unavailable: {reason}" for arm, reason in unavailable.items()]
        parts += [""]
    parts += ["## Per class", "", _md_table(*_class_table(policy)), ""]
    if applied:
        parts += [
            "## Policy as applied",
            "",
            APPLIED_WORDS,
            "",
            _md_table(*_applied_table(applied)),
        ]
        parts += [""]
    parts += [f"![reduction vs retention]({plot_name})", ""]
    parts += ["## Noise floors", "", _md_table(*_floor_table(curve)), ""]
    parts += ["## Every arm", "", _md_table(*_curve_table(curve)), ""]
    if agreement is not None:
        parts += ["## Judge agreement", "", *(f"- {line}" for line in _agreement_lines(agreement))]
        parts += [""]
    return "\n".join(parts)


def render_html(
    policy: Policy,
    curve: Curve,
    *,
    svg: str,
    agreement: JudgeAgreement | None = None,
    local_model: bool = False,
    unavailable: Mapping[str, str] | None = None,
    applied: Sequence[AppliedRetention] = (),
    graders: Sequence[str] = (),
) -> str:
    """The report as one page (template `report.html.j2`), the plot inlined as SVG
    (matplotlib's own output, so it is inserted unescaped; every text it holds was
    escaped by matplotlib's SVG writer)."""
    return render(
        "report.html.j2",
        calibration_id=policy.calibration_id,
        banner=LOCAL_MODEL_BANNER if local_model else None,
        summary=_summary(policy, curve, graders),
        policy_text="\n".join(seed_lines(policy)),
        unavailable=list((unavailable or {}).items()),
        class_table=_class_table(policy),
        applied_words=APPLIED_WORDS,
        applied_table=_applied_table(applied) if applied else None,
        plot_svg=svg,
        floor_table=_floor_table(curve),
        curve_table=_curve_table(curve),
        agreement_lines=_agreement_lines(agreement) if agreement is not None else [],
    )


def write_report(
    policy: Policy,
    curve: Curve,
    folder: str | Path | Location,
    *,
    name: str = "calibration",
    agreement: JudgeAgreement | None = None,
    local_model: bool = False,
    unavailable: Mapping[str, str] | None = None,
    applied: Sequence[AppliedRetention] = (),
    graders: Sequence[str] = (),
) -> ReportPaths:
    """Write `<folder>/<name>.md`, `.html` (self-contained) and `.png`, each all at once
    (`folder`: a path or a store URL).

    `unavailable` maps arm keys that could not run here (e.g. LLMLingua-2 without its
    weights) to the reason, so the report says what was not measured instead of omitting it.
    `graders` are the summary's lines on which grader graded which classes.
    """
    out = location(folder)
    png, svg = plot_images(curve, policy)
    plot = out.child(f"{name}.png")
    plot.write_bytes(png)

    def render(max_width: int | None) -> str:
        return render_markdown(
            policy,
            curve,
            plot_name=plot.name,
            agreement=agreement,
            local_model=local_model,
            unavailable=unavailable,
            applied=applied,
            max_width=max_width,
            graders=graders,
        )

    markdown, pane = render(None), render(PANE_WIDTH)
    paths = ReportPaths(
        out.child(f"{name}.md"), out.child(f"{name}.html"), plot, markdown, png, pane
    )
    paths.markdown.write_text(markdown)
    page = render_html(
        policy,
        curve,
        svg=svg,
        agreement=agreement,
        local_model=local_model,
        unavailable=unavailable,
        applied=applied,
        graders=graders,
    )
    paths.html.write_text(page)
    return paths


def outcome_lines(policy: Policy, exit_code: int) -> list[str]:
    """What the run decided per class, for the last lines a script or a person reads.

    A class *decided* when an arm held, when the walk's first arm failed by its interval
    on the tasks the evidence rule asks for, or when nothing was compressible; it was
    *refused* when the instrument could not say (too few tasks, a noisy control, nothing
    measured). Exit 4 means some requested class did not get a ✓ or ?: refused, or decided
    that no arm may be applied.
    """
    decided: list[str] = []
    refused: list[str] = []
    for entry in policy.classes.values():
        name = entry.task_class
        if entry.verdict != "none":
            decided.append(f"{name} {entry.mark} {_arm_text(entry)} held")
        elif entry.cause == "nothing_compressible":
            decided.append(f"{name}: nothing compressible")
        elif entry.cause == "no_arm_held" and entry.n_tasks >= (entry.tasks_needed or 0):
            decided.append(f"{name}: no arm held (failed by its interval)")
        else:
            why = {"too_few_tasks": "too few tasks", "unmeasurable": "unmeasurable"}
            refused.append(f"{name} ({why.get(str(entry.cause), 'too few graded pairs')})")
    head = {0: "exit 0: every class has an arm (✓ or ?)", 4: "exit 4: not certified"}.get(
        exit_code, f"exit {exit_code}"
    )
    parts = [f"decided — {'; '.join(decided)}" if decided else "decided — none"]
    if refused:
        parts.append(f"refused — {'; '.join(refused)}")
    return [f"{head}. " + ". ".join(parts) + "."]

"""From the walked curve to the published policy: verdicts, and the words behind them.

Every `none` says why in a sentence a person can act on, and carries a machine-readable
cause; a ✓ or ? says what it rests on. The chosen arm is the one the walk stored in the
curve's `chosen` column — this module never re-derives it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import pandas as pd

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision.curve import ALL_CLASSES, MAX_NOISE_FLOOR, Curve
from tokenlens.decision.evidence import UNREACHABLE
from tokenlens.decision.ladder import MIN_REDUCTION
from tokenlens.formatting import arm_label, level_label, pct
from tokenlens.policy import Interval, NoneCause, Policy, PolicyEntry

EXIT_OK = 0
#: `tokenlens calibrate` exit code when a requested class is unmeasurable or no arm held.
EXIT_UNRESOLVED = 4
#: Causes that mean "nothing could be certified although something was asked".
UNRESOLVED_CAUSES: tuple[NoneCause, ...] = ("unmeasurable", "no_arm_held", "too_few_tasks")


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _interval(low: Any, high: Any, confidence: float | None = None) -> Interval | None:
    lo, hi = _num(low), _num(high)
    return None if lo is None or hi is None else Interval(low=lo, high=hi, confidence=confidence)


def _none(name: str, cause: NoneCause, reason: str, **numbers: Any) -> PolicyEntry:
    return PolicyEntry(task_class=name, verdict="none", reason=reason, cause=cause, **numbers)


def _needs(count: int) -> str:
    return "no finite number of" if count >= UNREACHABLE else f"≥ {count}"


def _level(row: Any) -> float:
    """One-sided confidence of the row's bounds (0.95 when the curve predates the column)."""
    level = _num(row.get("bound_level")) if hasattr(row, "get") else None
    return 0.95 if level is None else level


def _reading(row: Any, mode: str) -> str:
    """What the rule read for an arm, with its error bar."""
    if mode == "mean":
        return f"kept {pct(row['retention_mean'])} against a {pct(row['bar'])} bar"
    aside = _num(row.get("n_set_aside")) if hasattr(row, "get") else None
    note = f", {int(aside)} derailed answer{'s' if aside != 1 else ''} set aside" if aside else ""
    return (
        f"retention {pct(row['retention'])} (one-sided {level_label(_level(row))} bound "
        f"{pct(row['retention_low'])}) over {int(row['n_tasks'])} tasks{note}"
    )


def _unmeasurable_reason(ctrl: Any, curve: Curve) -> str | None:
    floor = float(ctrl["noise_floor"])
    if curve.tolerance - floor <= 0:
        return (
            f"unmeasurable — the control lost {pct(floor)}, as much as the "
            f"{pct(curve.tolerance)} tolerance allows in total: the bar (tolerance − floor) "
            "would be 0 or negative and any arm would 'hold'"
        )
    low = _num(ctrl["noise_floor_low"])
    if curve.mode == "interval" and low is not None:
        if low > MAX_NOISE_FLOOR:
            return (
                f"unmeasurable — control lost {pct(floor)} (95% interval {pct(low)}–"
                f"{pct(ctrl['noise_floor_high'])}), wholly above the {MAX_NOISE_FLOOR:.0%} "
                "the instrument can tolerate"
            )
        return None
    if floor > MAX_NOISE_FLOOR:
        return (
            f"unmeasurable — control lost {pct(floor)} "
            f"(more than the {MAX_NOISE_FLOOR:.0%} the instrument can tolerate)"
        )
    return None


def unfaithful(row: Any) -> str:
    """Why an arm was refused on fidelity: what its compressed tool output broke."""
    fabricated, unmarked = int(row["fabricated_lines"] or 0), int(row["unmarked_drops"] or 0)
    lost = int(row["facts_lost"] or 0)
    parts = [f"{fabricated} fabricated lines"] if fabricated else []
    parts += [f"{unmarked} lines dropped without a marker"] if unmarked else []
    parts += [f"{lost} of the tasks' facts lost"] if lost else []
    return " and ".join(parts) + " in its compressed tool output, whatever its grades"


def entry_of(name: str, rows: pd.DataFrame, curve: Curve) -> PolicyEntry:
    """The entry of one class (or kind of tool output) from its rows of the curve."""
    control = rows[rows["arm"] == CONTROL]
    if control.empty:
        return _none(
            name,
            "unmeasurable",
            "unmeasurable — no control pair could be graded (its answers failed, e.g. were "
            "cut off at max_tokens, or the cleartext scored 0: see the grades table's error "
            "column), so the noise floor is unknown",
        )
    ctrl = control.iloc[0]
    floor = float(ctrl["noise_floor"])
    need = int(ctrl["tasks_needed"])
    need_measured = int(ctrl["tasks_needed_measured"])
    numbers: dict[str, Any] = {
        "noise_floor": floor,
        "noise_floor_interval": _interval(ctrl["noise_floor_low"], ctrl["noise_floor_high"]),
        "floor_judge": _num(ctrl["floor_judge"]),
        "floor_sampling": _num(ctrl["floor_sampling"]),
        "bar": _num(ctrl["bar"]),
        "n_tasks": int(ctrl["n_tasks"]),
        "n_pairs": int(ctrl["n_pairs"]),
        "tasks_needed": need if curve.mode == "interval" else None,
        "tasks_needed_measured": need_measured if curve.mode == "interval" else None,
    }
    refused = _unmeasurable_reason(ctrl, curve)
    if refused is not None:
        return _none(name, "unmeasurable", refused, **numbers)
    arms = rows[rows["arm"] != CONTROL]
    if arms.empty:
        return _none(
            name,
            "unmeasurable",
            "unmeasurable — no arm has a row for this class (no compressed answer was "
            "graded or even attempted), so nothing was measured",
            **numbers,
        )
    ignored = tuple(arms.loc[arms["status"] == "ignored", "arm"])
    unmeasured = list(arms.loc[arms["status"] == "not_measured", "arm"])
    walked = arms[~arms["status"].isin(["no_savings", "not_measured"])].sort_values("reduction")
    unmeasured_note = (
        "; not measured (every pair errored — see the grades table's error column): "
        + ", ".join(map(arm_label, unmeasured))
        if unmeasured
        else ""
    )
    if walked.empty:
        if unmeasured:
            return _none(
                name,
                "unmeasurable",
                "unmeasurable — no arm could be measured" + unmeasured_note,
                **numbers,
            )
        return _none(
            name,
            "nothing_compressible",
            f"nothing was compressible — no arm saved {MIN_REDUCTION:.1%} of the tokens",
            **numbers,
        )
    first = walked.iloc[0]
    if first["status"] == "failed" and int(first["n_tasks"]) < need:
        # Only a sequential futility stop fails an arm on fewer tasks than a verdict needs.
        high = _num(first["retention_high"])
        bound = f"its upper bound {pct(high)} " if high is not None else "its upper bound "
        return _none(
            name,
            "no_arm_held",
            f"no arm held quality — gentlest arm {arm_label(str(first['arm']))} "
            f"({pct(first['reduction'])} smaller) kept {pct(first['retention'])} over "
            f"{int(first['n_tasks'])} tasks: {bound}"
            f"was already below the {pct(curve.tolerance)} tolerance, so sampling stopped "
            f"at {int(first['n_tasks'])} tasks (more could not make it hold)" + unmeasured_note,
            ignored_arms=ignored,
            **numbers,
        )
    if (walked["status"] == "too_few_tasks").any():
        clears = (
            _num(first["retention_low"]) is not None
            and float(first["retention_low"]) >= curve.tolerance - 1e-12
        )
        hint = (
            f"; the gentlest arm {arm_label(str(first['arm']))} would clear it "
            f"({_reading(first, curve.mode)})"
            if clears
            else ""
        )
        return _none(
            name,
            "too_few_tasks",
            f"needs {_needs(need)} tasks for a {pct(curve.tolerance)} tolerance, has "
            f"{int(ctrl['n_tasks'])} with a graded control pair: with fewer, harm confined "
            f"to a few tasks would be invisible{hint}" + unmeasured_note,
            **numbers,
        )
    chosen_rows = arms[arms["chosen"].astype(bool)]
    if chosen_rows.empty:
        detail = f"gentlest arm {arm_label(str(first['arm']))} ({pct(first['reduction'])} smaller) "
        detail += _reading(first, curve.mode)
        if first["status"] == "unfaithful":
            detail = f"gentlest arm {arm_label(str(first['arm']))} refused: " + unfaithful(first)
        elif curve.mode == "interval":
            if int(first["n_tasks"]) < need:
                detail += f", needs {_needs(need)} tasks with graded pairs"
            else:
                detail += f" vs the {pct(curve.tolerance)} tolerance"
        return _none(
            name,
            "no_arm_held",
            f"no arm held quality — {detail}" + unmeasured_note,
            ignored_arms=ignored,
            **numbers,
        )
    chosen = chosen_rows.iloc[0]
    arm = Arm.parse(str(chosen["arm"]))
    certain = bool(chosen["certain"])
    verdict: Literal["measured", "provisional"] = "measured" if certain else "provisional"
    if certain:
        reason = (
            f"measured — {_reading(chosen, curve.mode)} holds at the {pct(curve.tolerance)} "
            f"tolerance beyond a {pct(floor)} noise floor"
        )
    elif floor > (1.0 - curve.tolerance) or curve.mode == "mean":
        reason = (
            "provisional — the harness could not detect harm because the loss sits inside "
            f"the {pct(floor)} noise floor"
        )
    else:
        reason = (
            f"provisional — {_reading(chosen, curve.mode)} holds, but ruling out harm "
            f"concentrated in a few tasks needs {_needs(need_measured)} tasks for a ✓"
        )
    refused = arms[arms["status"] == "unfaithful"]
    if not refused.empty:
        reason += "; refused (compression never invents): " + "; ".join(
            f"{arm_label(str(r['arm']))} — {unfaithful(r)}" for _, r in refused.iterrows()
        )
    if ignored:
        reason += "; ignored after the first failure: " + ", ".join(map(arm_label, ignored))
    reason += unmeasured_note
    retention = chosen["retention"] if curve.mode == "interval" else chosen["retention_mean"]
    return PolicyEntry(
        task_class=name,
        verdict=verdict,
        method=arm.method,
        rate=arm.rate,
        reduction_pct=100 * float(chosen["reduction"]),
        retention_mean=_num(retention),
        retention_interval=_interval(
            chosen["retention_low"],
            chosen["retention_high"],
            _level(chosen) if curve.mode == "interval" else None,
        ),
        worst_case=_num(chosen["worst_case"]),
        reason=reason,
        ignored_arms=ignored,
        **{**numbers, "n_tasks": int(chosen["n_tasks"]), "n_pairs": int(chosen["n_pairs"])},
    )


def decide(
    curve: Curve,
    *,
    calibration_id: str,
    model: str,
    requested_classes: Sequence[str] | None = None,
    created: datetime | None = None,
) -> Policy:
    """One entry per class of the curve (and per requested class), plus `default`.

    `default` applies the same rules to every class pooled; a requested class with no
    graded pairs is unmeasurable.
    """
    names = list(dict.fromkeys([*curve.classes(), *(requested_classes or ())]))
    classes: dict[str, PolicyEntry] = {}
    for name in names:
        rows = curve.rows(name)
        classes[name] = (
            entry_of(name, rows, curve)
            if not rows.empty
            else _none(name, "unmeasurable", "unmeasurable — no graded pairs for this class")
        )
    pooled = curve.rows(ALL_CLASSES)
    default = (
        entry_of("default", pooled, curve)
        if not pooled.empty
        else _none("default", "unmeasurable", "unmeasurable — no graded pairs at all")
    )
    return Policy(
        created=created or datetime.now(UTC),
        calibration_id=calibration_id,
        model=model,
        judge=curve.judge,
        tolerance=curve.tolerance,
        mode=curve.mode,
        classes=classes,
        default=default,
    )


def unresolved_classes(policy: Policy, requested_classes: Iterable[str] | None = None) -> list[str]:
    """Requested classes that are unmeasurable, had no arm hold, or need more tasks.

    A class whose earlier entry was carried over (`tokenlens.decision.carryover`) is
    unresolved too: this run could not measure it, whatever stays in force."""
    wanted = list(requested_classes) if requested_classes is not None else list(policy.classes)
    bad: list[str] = []
    for name in wanted:
        entry = policy.classes.get(name)
        if entry is None or entry.cause in UNRESOLVED_CAUSES or entry.carried_over is not None:
            bad.append(name)
    return bad


def exit_code(policy: Policy, requested_classes: Iterable[str] | None = None) -> int:
    """`EXIT_UNRESOLVED` when any requested class could not be resolved."""
    return EXIT_UNRESOLVED if unresolved_classes(policy, requested_classes) else EXIT_OK

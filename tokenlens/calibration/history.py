"""History and drift: how each class's verdict, arm, retention and noise floor moved.

Read from what every run keeps (`tokenlens.calibration.runs`): its manifest, its policy
(`<reports>/runs/<run-id>/policy.json`) and its curve table, through `tokenlens.storage`
(the store and the reports root may be local folders or URLs). A change is *significant*
when an interval no longer overlaps the previous run's: the tracked arm's retention
bounds, or the noise floor's. Verdict and arm changes are shown too, but a verdict can
flip on noise; non-overlapping intervals cannot (at the intervals' confidence).

Per class, history tracks one arm across runs so rows compare like with like: the arm
the newest run chose, else the gentlest arm that saved tokens in the newest run.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from tokenlens.calibration.run_settings import (
    instrument_changes,
    settings_changes,
)
from tokenlens.calibration.runs import RunManifest, find_run, list_runs
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.decision import ALL_CLASSES
from tokenlens.errors import PolicyError, TokenLensError
from tokenlens.formatting import arm_label, interval, pct
from tokenlens.policy import VERDICT_MARK, Policy, load_policy
from tokenlens.storage import location, read_parquet
from tokenlens.tables import CurveRow

DEFAULT_LAST = 10


@dataclass(frozen=True)
class Reading:
    """A value with its interval (fractions; None where unknown)."""

    value: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        if self.value is None:
            return "n/a"
        if self.low is None or self.high is None:
            return pct(self.value)
        return f"{pct(self.value)} [{interval(self.low, self.high)}]"


def overlaps(a: Reading, b: Reading) -> bool | None:
    """Whether two intervals overlap; None when either is missing (nothing to say)."""
    if None in (a.low, a.high, b.low, b.high):
        return None
    assert a.low is not None and a.high is not None and b.low is not None and b.high is not None
    return a.low <= b.high and b.low <= a.high


@dataclass(frozen=True)
class ClassState:
    """One class in one run: the policy's verdict and arm, every arm's retention, the floor."""

    verdict: str
    chosen: str | None  # arm key, None for a `none` verdict
    reduction_pct: float | None
    floor: Reading
    arms: dict[str, Reading]
    reductions: dict[str, float | None]
    gentlest: str | None  # the first arm of the walk that saved tokens
    #: The run whose entry this run carried over (it could not measure the class).
    carried_from: str | None = None


@dataclass(frozen=True)
class RunState:
    manifest: RunManifest
    policy: Policy
    classes: dict[str, ClassState]

    @property
    def run_id(self) -> str:
        return self.manifest.run_id


def _num(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def read_run(store: str | Path, reports: str | Path, manifest: RunManifest) -> RunState | None:
    """A finished run's policy and curve, or None when either was not written."""
    policy_path = location(reports).child("runs", manifest.run_id, "policy.json")
    curve_path = location(store).child("runs", manifest.run_id, "curve.parquet")
    try:
        rows = cast(list[CurveRow], read_parquet(curve_path).to_pylist())
        policy = load_policy(policy_path)
    except FileNotFoundError:
        return None
    except PolicyError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        raise
    classes: dict[str, ClassState] = {}
    for name in [*policy.classes, "default"]:
        key = ALL_CLASSES if name == "default" else name
        mine = [r for r in rows if r["task_class"] == key]
        entry = policy.default if name == "default" else policy.classes[name]
        arms = {
            r["arm"]: Reading(
                _num(r["retention"]), _num(r["retention_low"]), _num(r["retention_high"])
            )
            for r in mine
            if r["arm"] != CONTROL
        }
        walked = sorted(
            (r for r in mine if r["arm"] != CONTROL and r["status"] not in ("no_savings",)),
            key=lambda r: Arm.parse(r["arm"]).ladder_rank,
        )
        control = next((r for r in mine if r["arm"] == CONTROL), None)
        floor = (
            Reading(
                _num(control["noise_floor"]),
                _num(control["noise_floor_low"]),
                _num(control["noise_floor_high"]),
            )
            if control is not None
            else Reading(None, None, None)
        )
        classes[name] = ClassState(
            verdict=entry.verdict,
            chosen=None if entry.arm is None else entry.arm.key,
            reduction_pct=entry.reduction_pct,
            floor=floor,
            arms=arms,
            reductions={r["arm"]: _num(r["reduction"]) for r in mine},
            gentlest=walked[0]["arm"] if walked else None,
            carried_from=(
                entry.carried_over.from_run or entry.carried_over.from_calibration
                if entry.carried_over
                else None
            ),
        )
    return RunState(manifest, policy, classes)


def load_history(
    store: str | Path, reports: str | Path, *, last: int = DEFAULT_LAST
) -> list[RunState]:
    """The last `last` finished runs of the store that published a policy, oldest first."""
    states = [
        state
        for manifest in list_runs(store)
        if manifest.status == "finished"
        and (state := read_run(store, reports, manifest)) is not None
    ]
    return states[-last:] if last > 0 else states


@dataclass(frozen=True)
class HistoryRow:
    """One class in one run, as the history table shows it."""

    task_class: str
    run_id: str
    created: datetime
    fresh_sample: bool
    verdict: str
    chosen: str
    tracked_arm: str
    carried_from: str | None
    reduction: float | None
    retention: Reading
    floor: Reading
    #: Significant changes against the previous run (intervals that no longer overlap).
    flags: list[str] = field(default_factory=list)
    #: Other changes (verdict, chosen arm): worth a look, but noise can cause them.
    notes: list[str] = field(default_factory=list)
    #: Settings that differ from the previous run's (judge, tolerance, ...), as
    #: `name before → after`; an instrument change also silences the flags.
    settings: dict[str, str] = field(default_factory=dict)


def tracked_arm(states: Sequence[RunState], task_class: str) -> str | None:
    """The arm a class's history follows: the newest run's choice, else its gentlest arm."""
    for state in reversed(states):
        cls = state.classes.get(task_class)
        if cls is not None:
            return cls.chosen or cls.gentlest
    return None


def _changes(previous: HistoryRow | None, row: HistoryRow, arm_text: str) -> None:
    """Fill `row.flags` (significant: an interval stopped overlapping) and `row.notes`
    (a verdict or arm that changed, which noise alone can do). Across a change of model
    or judge the readings come from another instrument: nothing is flagged, the note
    says why."""
    if previous is None:
        return
    instrument = instrument_changes(row.settings)
    if row.settings:
        changed = "; ".join(f"{key} {text}" for key, text in row.settings.items())
        row.notes.append(f"settings changed: {changed}")
    if instrument:
        row.notes.append(f"not comparable with the run before ({', '.join(instrument)} changed)")
    else:
        if overlaps(previous.retention, row.retention) is False:
            row.flags.append(f"retention of {arm_text} moved")
        if overlaps(previous.floor, row.floor) is False:
            row.flags.append("noise floor moved")
    if previous.verdict != row.verdict:
        row.notes.append(f"verdict {previous.verdict} → {row.verdict}")
    elif previous.chosen != row.chosen:
        row.notes.append(f"arm {previous.chosen} → {row.chosen}")


def history_rows(states: Sequence[RunState], task_class: str | None = None) -> list[HistoryRow]:
    """Per class (or just `task_class`), one row per run, oldest first, with change flags."""
    names = list(dict.fromkeys(name for s in states for name in s.classes))
    if task_class is not None:
        if task_class not in names:
            known = ", ".join(names) or "none"
            raise TokenLensError(f"class {task_class!r} is in no run (classes: {known})")
        names = [task_class]
    rows: list[HistoryRow] = []
    for name in names:
        arm = tracked_arm(states, name)
        label = arm_label(arm) if arm else "—"
        previous: HistoryRow | None = None
        previous_state: RunState | None = None
        for state in states:
            cls = state.classes.get(name)
            if cls is None:
                continue
            row = HistoryRow(
                task_class=name,
                run_id=state.run_id,
                created=state.manifest.created,
                fresh_sample=state.manifest.fresh_sample,
                verdict=cls.verdict,
                chosen=arm_label(cls.chosen) if cls.chosen else "none",
                carried_from=cls.carried_from,
                tracked_arm=label,
                reduction=cls.reductions.get(arm) if arm else None,
                retention=cls.arms.get(arm, Reading(None, None, None))
                if arm
                else Reading(None, None, None),
                floor=cls.floor,
                settings=settings_changes(previous_state, state) if previous_state else {},
            )
            _changes(previous, row, label)
            rows.append(row)
            previous, previous_state = row, state
    return rows


HISTORY_HEADER = (
    "class",
    "run",
    "verdict",
    "chosen arm",
    "tracked arm",
    "reduction",
    "retention [95% bounds]",
    "noise floor [95%]",
    "change",
)


def history_cells(rows: Sequence[HistoryRow]) -> list[list[str]]:
    """The history table's cells as text (shared by the CLI and the trend artifact)."""
    return [
        [
            row.task_class,
            row.run_id + (" (fresh)" if row.fresh_sample else ""),
            f"{VERDICT_MARK[row.verdict]} {row.verdict}"
            + (f" (carried over from {row.carried_from})" if row.carried_from else ""),
            row.chosen,
            row.tracked_arm,
            pct(row.reduction),
            row.retention.text(),
            row.floor.text(),
            "; ".join([*(f"⚠ {flag}" for flag in row.flags), *row.notes]),
        ]
        for row in rows
    ]


@dataclass(frozen=True)
class ArmChange:
    arm: str
    before: Reading
    after: Reading
    significant: bool


@dataclass(frozen=True)
class ClassChange:
    """What changed for one class between two runs."""

    task_class: str
    before: ClassState | None
    after: ClassState | None
    floor_moved: bool
    arms: list[ArmChange]

    @property
    def significant(self) -> bool:
        return self.floor_moved or any(a.significant for a in self.arms)


def compare_states(a: RunState, b: RunState) -> list[ClassChange]:
    """Per class of either run: verdicts, floors and every arm measured in both; across
    an instrument change nothing is flagged as moved (the rule `history` follows)."""
    changes: list[ClassChange] = []
    comparable = not instrument_changes(settings_changes(a, b))
    for name in dict.fromkeys([*a.classes, *b.classes]):
        before, after = a.classes.get(name), b.classes.get(name)
        arms: list[ArmChange] = []
        if before is not None and after is not None:
            shared = [arm for arm in before.arms if arm in after.arms]
            for arm in sorted(shared, key=lambda k: Arm.parse(k).ladder_rank):
                moved = comparable and overlaps(before.arms[arm], after.arms[arm]) is False
                arms.append(ArmChange(arm, before.arms[arm], after.arms[arm], moved))
        floor_moved = (
            comparable
            and before is not None
            and after is not None
            and overlaps(before.floor, after.floor) is False
        )
        changes.append(ClassChange(name, before, after, floor_moved, arms))
    return changes


def _verdict_text(state: ClassState | None) -> str:
    if state is None:
        return "not in this run"
    arm = arm_label(state.chosen) if state.chosen else "none"
    reduction = "" if state.reduction_pct is None else f", {state.reduction_pct:.1f}% smaller"
    carried = f" (carried over from {state.carried_from})" if state.carried_from else ""
    return f"{VERDICT_MARK[state.verdict]} {state.verdict}: {arm}{reduction}{carried}"


def compare_lines(a: RunState, b: RunState) -> list[str]:
    """`tokenlens compare A B` as lines: per class, verdicts, floor and arms; ⚠ marks a
    change whose intervals no longer overlap."""
    lines = [
        f"{a.run_id} (calibration {a.manifest.calibration_id}, seed {a.manifest.seed}) → "
        f"{b.run_id} (calibration {b.manifest.calibration_id}, seed {b.manifest.seed})"
    ]
    changed = settings_changes(a, b)
    if changed:
        lines.append("settings changed: " + "; ".join(f"{k} {v}" for k, v in changed.items()))
        instrument = instrument_changes(changed)
        if instrument:
            lines.append(
                f"  not comparable ({', '.join(instrument)} changed): the readings come from "
                "different instruments, so no interval is flagged as moved"
            )
    else:
        lines.append("settings: the same (model, judge, tolerance, mode, tasks, ladder, repeats)")
    for change in compare_states(a, b):
        mark = "⚠ " if change.significant else ""
        lines.append("")
        lines.append(f"{mark}{change.task_class}")
        lines.append(
            f"  verdict      {_verdict_text(change.before)}  →  {_verdict_text(change.after)}"
        )
        if change.before is not None and change.after is not None:
            flag = "  ⚠ moved" if change.floor_moved else ""
            lines.append(
                f"  noise floor  {change.before.floor.text()}  →  {change.after.floor.text()}{flag}"
            )
        for arm in change.arms:
            flag = "  ⚠ moved" if arm.significant else ""
            lines.append(
                f"  {arm_label(arm.arm):<12} {arm.before.text()}  →  {arm.after.text()}{flag}"
            )
    return lines


def find_state(store: str | Path, reports: str | Path, ref: str) -> tuple[RunState, str | None]:
    """A finished run by id, or a calibration id's newest *finished* run, with its files,
    and a line saying which run a calibration id stood for (None for a run id).

    A newer run of the calibration still in progress is passed over, never offered for a
    resume: resuming a live run would pay for its calls a second time beside it."""
    runs = list_runs(store)
    if any(m.run_id == ref for m in runs):
        manifest, note = find_run(store, ref), None
    else:
        of_calibration = [m for m in runs if m.calibration_id == ref]
        finished = [m for m in of_calibration if m.status == "finished"]
        if not finished:
            manifest, note = find_run(store, ref), None  # names the store, or is unfinished
        else:
            manifest = finished[-1]
            newer = of_calibration[of_calibration.index(manifest) + 1 :]
            note = f"{ref}: newest finished run {manifest.run_id}" + "".join(
                f"; {m.run_id} {_unfinished(m)}, not compared" for m in newer
            )
    state = read_run(store, reports, manifest)
    if state is None:
        raise TokenLensError(f"run {manifest.run_id} {_unfinished(manifest)}")
    return state, note


def _unfinished(manifest: RunManifest) -> str:
    """Why a run has no results yet, and what to do about it."""
    from tokenlens.processes import process_alive

    live = manifest.status == "running" and (
        manifest.pid is None
        or manifest.host not in (None, socket.gethostname())
        or process_alive(manifest.pid)
    )
    if live:
        where = f" (pid {manifest.pid})" if manifest.pid else ""
        return f"is still running{where}: compare it once it has finished"
    return (
        f"has no published policy and curve (status: {manifest.status}); resume it with "
        f"`tokenlens calibrate --resume {manifest.run_id}`"
    )

"""One bad night must not switch compression off: carry the last certified entry over.

A run that *measured* a failure (the arm lost: `no_arm_held`) retracts the class's entry at
once. A run that could not measure the class (`COULD_NOT_MEASURE`: an outage left no
graded control pair, the spend cap stopped it, the control was too noisy, too few pairs)
says nothing new about it, so the entry the previous policy certified stays in force, marked
as carried over (from which run, since when, and why), until it is `max_policy_age` old
counted from the run that certified it. Every entry with an arm carries the dates, so the
proxy, which reads nothing but the policy, stops applying any entry past its age limit
(`PolicyEntry.expired`) even if no run ever publishes again.

Only a previous policy measured the same way (answer model, backend, judge, tolerance,
mode) is carried from: an entry certified at another tolerance or by another judge is not
a certificate for this one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from tokenlens.formatting import arm_label
from tokenlens.policy import COULD_NOT_MEASURE, CarriedOver, Policy, PolicyEntry


def _day(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def stamp(policy: Policy, max_age: timedelta | None) -> Policy:
    """Date every fresh entry with an arm (a tool-output entry's too): certified at the
    policy's creation, expiring `max_age` later (None: never)."""

    def dated(entry: PolicyEntry, tool: bool = False) -> PolicyEntry:
        arm = entry.tool_arm if tool else entry.arm
        if arm is None or entry.carried_over is not None:
            return entry
        certified = entry.certified_at or policy.created
        expires = None if max_age is None else certified + max_age
        return entry.model_copy(update={"certified_at": certified, "expires_at": expires})

    tools = {kind: dated(entry, tool=True) for kind, entry in policy.tool_output.items()}
    return _map(policy, dated).model_copy(update={"tool_output": tools})


def mismatch(previous: Policy, new: Policy) -> list[str]:
    """The measurement settings that differ between two policies (empty: comparable)."""
    found = []
    for name in ("model", "backend", "judge", "tolerance", "mode"):
        before, after = getattr(previous, name), getattr(new, name)
        if before != after and not (name == "backend" and None in (before, after)):
            found.append(f"{name} {before} → {after}")
    return found


def carry_over(
    new: Policy,
    previous: Policy | None,
    *,
    max_age: timedelta | None,
    now: datetime,
) -> Policy:
    """`new` with each could-not-measure entry replaced by `previous`'s certified one.

    Entries are dated first (`stamp`). An earlier entry already past its age limit (counted
    with today's `max_age`) is not carried; the `none` entry then says so.
    """
    new = stamp(new, max_age)
    if previous is None:
        return new
    differs = mismatch(previous, new)

    def carried(entry: PolicyEntry, tool: bool = False) -> PolicyEntry:
        if entry.cause not in COULD_NOT_MEASURE:
            return entry
        if tool:
            old = previous.tool_output.get(entry.task_class)
            arm_key = None if old is None or old.tool_arm is None else old.tool_arm.key
        else:
            old = (
                previous.default
                if entry.task_class == "default"
                else previous.classes.get(entry.task_class)
            )
            arm_key = None if old is None or old.arm is None else old.arm.key
        if old is None or arm_key is None:
            return entry
        label = arm_label(arm_key)
        if differs:
            note = (
                f"; the last policy's {label} (calibration {previous.calibration_id}) is not "
                f"carried over: it was measured with other settings ({'; '.join(differs)})"
            )
            return entry.model_copy(update={"reason": entry.reason + note})
        certified = old.certified_at or previous.created
        expires = None if max_age is None else certified + max_age
        if expires is not None and now >= expires:
            note = (
                f"; the last certified entry ({label}, certified {_day(certified)}) is past "
                f"its age limit ({_day(expires)}), so it is not carried over"
            )
            return entry.model_copy(update={"reason": entry.reason + note})
        earlier = old.carried_over
        record = CarriedOver(
            from_run=earlier.from_run if earlier else previous.run_id,
            from_calibration=earlier.from_calibration if earlier else previous.calibration_id,
            since=earlier.since if earlier else new.created,
            since_run=earlier.since_run if earlier else new.run_id,
            why=entry.reason,
        )
        source = record.from_run or record.from_calibration
        until = f"until {_day(expires)}" if expires is not None else "with no age limit"
        reason = (
            f"carried over from run {source} (certified {_day(certified)}), in force {until}: "
            f"this run could not measure the class — {entry.reason}"
        )
        return old.model_copy(
            update={
                "certified_at": certified,
                "expires_at": expires,
                "carried_over": record,
                "reason": reason,
                # the old night's walk (what it ignored after a failure) is not tonight's
                "ignored_arms": (),
            }
        )

    tools = {kind: carried(entry, tool=True) for kind, entry in new.tool_output.items()}
    return _map(new, carried).model_copy(update={"tool_output": tools})


def carry_everything(
    previous: Policy,
    *,
    why: str,
    run_id: str | None,
    max_age: timedelta | None,
    now: datetime,
) -> Policy:
    """The previous policy re-published by a run that measured nothing (e.g. stopped at
    the spend cap): every certified entry carried over, with `why`."""
    blank = previous.model_copy(
        update={
            "created": now,
            "run_id": run_id,
            "classes": {name: _unmeasured(entry, why) for name, entry in previous.classes.items()},
            "default": _unmeasured(previous.default, why),
        }
    )
    return carry_over(blank, previous, max_age=max_age, now=now)


def _unmeasured(entry: PolicyEntry, why: str) -> PolicyEntry:
    if entry.arm is None:
        return entry
    return PolicyEntry(
        task_class=entry.task_class, verdict="none", cause="unmeasurable", reason=why
    )


def _map(policy: Policy, change: Callable[[PolicyEntry], PolicyEntry]) -> Policy:
    return policy.model_copy(
        update={
            "classes": {name: change(entry) for name, entry in policy.classes.items()},
            "default": change(policy.default),
        }
    )


def carried_note(entry: PolicyEntry, now: datetime | None = None) -> str:
    """`CARRIED OVER since …` for an entry kept from an earlier run (report, CLI, logs)."""
    record = entry.carried_over
    assert record is not None
    until = (
        "no age limit" if entry.expires_at is None else f"in force until {_day(entry.expires_at)}"
    )
    certified = _day(entry.certified_at) if entry.certified_at else "?"
    expired = " — EXPIRED, not applied" if now is not None and entry.expired(now) else ""
    return (
        f"CARRIED OVER since {_day(record.since)} from run "
        f"{record.from_run or record.from_calibration} (certified {certified}; {until}): "
        f"this run could not measure the class{expired}"
        + (f" — {record.why}" if record.why else "")
    )


def carried_lines(policy: Policy, now: datetime | None = None) -> list[str]:
    """`class arm: CARRIED OVER …` for every carried-over entry of `policy`."""
    return [
        f"{entry.task_class} {arm_label(entry.arm.key) if entry.arm else 'none'}: "
        + carried_note(entry, now)
        for entry in policy.entries()
        if entry.carried_over is not None
    ]

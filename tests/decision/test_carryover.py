"""One bad night must not switch compression off: a night that could not measure a class
keeps its last certified entry until the age limit; a night that measured a failure
retracts it at once. Plain functions, no server (the flow-level test is
`tests/calibration/test_carry_over.py`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tokenlens.compress.arms import Arm
from tokenlens.decision import exit_code, unresolved_classes
from tokenlens.decision.carryover import carried_lines, carry_everything, carry_over, stamp
from tokenlens.errors import PolicyError
from tokenlens.policy import (
    SCHEMA_VERSION,
    NoneCause,
    Policy,
    PolicyEntry,
    load_policy,
    offline_reason,
    parse_policy,
)
from tokenlens.report import seed_lines

WEEK = timedelta(days=7)
MONDAY = datetime(2026, 11, 2, 2, 30, tzinfo=UTC)


def certified(name: str, method: str = "prune", rate: float | None = 0.5) -> PolicyEntry:
    return PolicyEntry(
        task_class=name,
        verdict="measured",
        method=method,
        rate=rate,
        reduction_pct=30.0,
        retention_mean=0.98,
        bar=0.95,
        reason=f"measured — {name} held",
    )


def nothing(name: str, cause: NoneCause, reason: str = "") -> PolicyEntry:
    return PolicyEntry(
        task_class=name, verdict="none", cause=cause, reason=reason or f"{cause} tonight"
    )


def policy(
    created: datetime,
    run_id: str,
    classes: dict[str, PolicyEntry],
    default: PolicyEntry | None = None,
    **settings: object,
) -> Policy:
    fields: dict[str, object] = {
        "created": created,
        "calibration_id": "cal-0000000a",
        "run_id": run_id,
        "model": "claude-haiku-4-5",
        "backend": "anthropic",
        "judge": "metric",
        "tolerance": 0.95,
        "mode": "interval",
        "classes": classes,
        "default": default or certified("default", "safe", None),
    }
    fields.update(settings)
    return Policy.model_validate(fields)


def monday() -> Policy:
    """The night that certified everything, dated as the publish step dates it."""
    good = policy(
        MONDAY, "run-monday", {"extraction": certified("extraction"), "code": certified("code")}
    )
    return stamp(good, WEEK)


def test_a_fresh_entry_is_dated_with_its_age_limit() -> None:
    entry = monday().classes["extraction"]
    assert entry.certified_at == MONDAY and entry.expires_at == MONDAY + WEEK
    assert entry.carried_over is None
    assert not entry.expired(MONDAY + WEEK - timedelta(seconds=1))
    assert entry.expired(MONDAY + WEEK)
    unlimited = stamp(policy(MONDAY, "r", {"x": certified("x")}), None).classes["x"]
    assert unlimited.certified_at == MONDAY and unlimited.expires_at is None
    none = stamp(policy(MONDAY, "r", {"x": nothing("x", "no_arm_held")}), WEEK).classes["x"]
    assert none.certified_at is None and none.expires_at is None  # nothing to date


def test_a_night_that_could_not_measure_carries_the_last_certified_entry() -> None:
    tuesday = MONDAY + timedelta(days=1)
    outage = policy(
        tuesday,
        "run-tuesday",
        {
            "extraction": nothing("extraction", "unmeasurable", "unmeasurable — no control pair"),
            "code": nothing("code", "too_few_tasks", "needs ≥ 20 tasks, has 3"),
        },
        default=nothing("default", "unmeasurable"),
    )
    merged = carry_over(outage, monday(), max_age=WEEK, now=tuesday)
    for name in ("extraction", "code", "default"):
        entry = merged.entry_for(name) if name != "default" else merged.default
        assert entry.arm is not None and entry.verdict == "measured", name
        record = entry.carried_over
        assert record is not None
        assert (record.from_run, record.since, record.since_run) == (
            "run-monday",
            tuesday,
            "run-tuesday",
        )
        assert entry.certified_at == MONDAY and entry.expires_at == MONDAY + WEEK
    extraction = merged.classes["extraction"]
    assert extraction.arm == Arm("prune", 0.5)
    assert "no control pair" in (extraction.carried_over.why if extraction.carried_over else "")
    assert extraction.reason.startswith("carried over from run run-monday")
    # This night still failed: the run exits 4 and says which classes it could not measure.
    assert unresolved_classes(merged) == ["extraction", "code"] and exit_code(merged) == 4
    lines = "\n".join(seed_lines(merged))
    assert "CARRIED OVER since 2026-11-03 02:30 UTC from run run-monday" in lines
    assert "in force until 2026-11-09 02:30 UTC" in lines
    assert len(carried_lines(merged)) == 3

    # A second bad night keeps the first one's dates: the age counts from the certificate.
    wednesday = tuesday + timedelta(days=1)
    again = carry_over(
        outage.model_copy(update={"created": wednesday, "run_id": "run-wednesday"}),
        merged,
        max_age=WEEK,
        now=wednesday,
    )
    record = again.classes["extraction"].carried_over
    assert record is not None and record.since == tuesday and record.from_run == "run-monday"
    assert again.classes["extraction"].expires_at == MONDAY + WEEK


def test_a_measured_failure_retracts_at_once() -> None:
    tuesday = MONDAY + timedelta(days=1)
    lost = policy(
        tuesday,
        "run-tuesday",
        {
            "extraction": nothing("extraction", "no_arm_held", "no arm held quality"),
            "code": nothing("code", "nothing_compressible"),
        },
        default=nothing("default", "no_arm_held"),
    )
    merged = carry_over(lost, monday(), max_age=WEEK, now=tuesday)
    for entry in merged.entries():
        assert entry.arm is None and entry.carried_over is None
    assert merged.classes["extraction"].reason == "no arm held quality"


def test_past_the_age_limit_nothing_is_carried_and_the_reason_says_so() -> None:
    late = MONDAY + WEEK + timedelta(hours=1)
    outage = policy(late, "run-late", {"extraction": nothing("extraction", "unmeasurable")})
    merged = carry_over(outage, monday(), max_age=WEEK, now=late)
    entry = merged.classes["extraction"]
    assert entry.arm is None and entry.carried_over is None
    assert "past its age limit (2026-11-09 02:30 UTC)" in entry.reason
    # The operator's age limit of today applies, not the one the entry was written with.
    longer = carry_over(outage, monday(), max_age=timedelta(days=14), now=late)
    assert longer.classes["extraction"].arm == Arm("prune", 0.5)
    assert longer.classes["extraction"].expires_at == MONDAY + timedelta(days=14)


def test_nothing_is_carried_from_a_policy_measured_another_way() -> None:
    tuesday = MONDAY + timedelta(days=1)
    stricter = policy(
        tuesday,
        "run-tuesday",
        {"extraction": nothing("extraction", "unmeasurable")},
        tolerance=0.99,
        judge="claude-haiku-4-5",
    )
    merged = carry_over(stricter, monday(), max_age=WEEK, now=tuesday)
    entry = merged.classes["extraction"]
    assert entry.arm is None
    assert "judge metric → claude-haiku-4-5" in entry.reason and "tolerance 0.95 → 0.99" in (
        entry.reason
    )


def test_a_run_that_measured_nothing_republishes_everything_carried() -> None:
    tuesday = MONDAY + timedelta(days=1)
    capped = carry_everything(
        monday(), why="spend cap reached", run_id="run-tuesday", max_age=WEEK, now=tuesday
    )
    assert capped.run_id == "run-tuesday" and capped.created == tuesday
    for entry in capped.entries():
        assert entry.arm is not None and entry.carried_over is not None
        assert entry.carried_over.why == "spend cap reached"
        assert entry.certified_at == MONDAY


def test_old_policy_files_still_load_and_never_expire(tmp_path: Path) -> None:
    """A schema-1 file (no dates, no backend) loads; its entries have no age limit."""
    raw = json.loads(monday().model_dump_json())
    raw["schema_version"] = 1
    for entry in [*raw["classes"].values(), raw["default"]]:
        for key in ("certified_at", "expires_at", "carried_over"):
            del entry[key]
    del raw["backend"]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(raw))
    loaded = load_policy(old)
    assert loaded.schema_version == 1 and loaded.backend is None
    assert not loaded.classes["extraction"].expired(datetime(2100, 1, 1, tzinfo=UTC))
    assert Policy.model_fields["schema_version"].default == SCHEMA_VERSION == 4
    raw["schema_version"] = 5
    with pytest.raises(PolicyError, match="schema_version 5 is not supported"):
        parse_policy(json.dumps(raw), "v4.json")


def test_offline_policies_are_named_by_backend_or_by_model() -> None:
    assert offline_reason(monday()) is None
    local = monday().model_copy(update={"backend": "local", "model": "SmolLM2-135M-Instruct.Q4_1"})
    assert "embedded local model 'SmolLM2-135M-Instruct.Q4_1'" in (offline_reason(local) or "")
    old_local = local.model_copy(update={"backend": None})
    assert "not a Claude model" in (offline_reason(old_local) or "")

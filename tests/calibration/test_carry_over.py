"""A failed nightly against the loopback Anthropic server: what the published policy says.

On main before this change every failed night published an empty policy (every proxy back
to `safe` only). Now: a night that could not measure (an outage, the spend cap) keeps the
last certified entries, marked carried over, until their age limit; a night that measured
a failure retracts the entry at once. The run still ends unresolved (exit 4 / Failed), so
the operator is told.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flows.calibrate import calibrate, flow_parameters
from tests.policies import publish_certified
from tokenlens.calibration.history import history_cells, history_rows, load_history
from tokenlens.calibration.result import CalibrationResult
from tokenlens.compress.arms import Arm
from tokenlens.config import CalibrationConfig
from tokenlens.errors import SpendLimitReached
from tokenlens.policy import Policy, load_policy
from tokenlens.proxy.apply import choose_arm
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


def run(config: CalibrationConfig, **options: Any) -> CalibrationResult:
    options.setdefault("fail_on_unresolved", False)
    return calibrate(**flow_parameters(config, **options))


def latest(config: CalibrationConfig) -> Policy:
    return load_policy(Path(config.reports) / "policy" / "latest.json")


def test_an_outage_night_keeps_the_last_certified_entry_until_its_age_limit(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    config = make_config(classes=("extraction",), methods=("safe",))
    two_days_ago = datetime.now(UTC) - timedelta(days=2)
    good = publish_certified(config, two_days_ago)
    anthropic.set_fault_rate(1.0, kinds=("403",))  # every call refused: nothing measured

    result = run(config)
    assert result.exit_code == 4 and result.unresolved_classes == ["extraction"]
    policy = latest(config)
    assert policy.run_id == result.run_id
    entry = policy.classes["extraction"]
    assert entry.arm == Arm("prune", 0.5)  # still in force
    assert entry.carried_over is not None
    assert entry.carried_over.from_run == good.run_id
    assert entry.carried_over.since == policy.created
    assert entry.certified_at == two_days_ago
    assert entry.expires_at == two_days_ago + timedelta(days=7)
    assert "no control pair could be graded" in entry.carried_over.why
    assert policy.default.arm == Arm("safe") and policy.default.carried_over is not None
    # The report and the run's own policy file say so.
    report = (Path(result.report_path).parent / "calibration.md").read_text()
    assert "CARRIED OVER since" in report and good.run_id in report
    assert load_policy(result.policy_path).classes["extraction"].carried_over is not None
    # The proxy reads the file and applies the carried entry.
    store = PolicyStore(Path(config.reports) / "policy" / "latest.json")
    choice = choose_arm(
        store.policy, "extraction", override=None, allow_provisional=False, fallen_back=False
    )
    assert choice.arm == Arm("prune", 0.5)

    # `tokenlens history` does not show the carried entry as this night's verdict.
    [row] = [r for r in history_rows(load_history(config.store, config.reports), "extraction")]
    assert row.carried_from == good.run_id
    assert f"(carried over from {good.run_id})" in history_cells([row])[0][2]

    # A second bad night: still carried, since the first one.
    again = run(config, fresh_sample=True)
    record = latest(config).classes["extraction"].carried_over
    assert again.exit_code == 4 and record is not None and record.since == policy.created


def test_past_the_age_limit_an_outage_night_carries_nothing(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    config = make_config(classes=("extraction",), methods=("safe",), max_policy_age=3)
    publish_certified(config, datetime.now(UTC) - timedelta(days=4))
    anthropic.set_fault_rate(1.0, kinds=("403",))
    run(config)
    entry = latest(config).classes["extraction"]
    assert entry.arm is None and entry.carried_over is None
    assert "past its age limit" in entry.reason


def test_a_night_stopped_by_the_spend_cap_republishes_the_policy_carried(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    config = make_config(classes=("extraction",), max_spend=0.01, concurrency=1)
    good = publish_certified(config, datetime.now(UTC) - timedelta(days=1))
    with pytest.raises(SpendLimitReached):
        run(config)
    policy = latest(config)
    entry = policy.classes["extraction"]
    assert entry.arm == Arm("prune", 0.5) and entry.carried_over is not None
    assert entry.carried_over.from_run == good.run_id
    assert "spend" in entry.carried_over.why
    assert policy.run_id != good.run_id  # re-published by the capped run


def test_a_night_that_measured_a_failure_retracts_at_once(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    """20 extraction tasks, one repeat: `safe` measurably loses on the fake model (its
    answers are a seeded pick among near-ties), a verdict, not an outage."""
    config = make_config(
        classes=("extraction",), methods=("safe",), max_tasks_per_class=20, repeats=1
    )
    publish_certified(config, datetime.now(UTC) - timedelta(days=1))
    result = run(config)
    entry = latest(config).classes["extraction"]
    assert entry.cause == "no_arm_held" and entry.arm is None
    assert entry.carried_over is None
    assert result.exit_code == 4

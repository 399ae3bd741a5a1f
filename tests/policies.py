"""A published policy for tests that need one in force (what a failed night carries over)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from tests.decision.test_carryover import certified
from tokenlens.config import CalibrationConfig
from tokenlens.decision.carryover import stamp
from tokenlens.policy import Policy, write_policy


def publish_certified(config: CalibrationConfig, created: datetime) -> Policy:
    """Last week's good night: extraction ✓ prune@0.5, default ✓ safe, same settings."""

    good = Policy(
        created=created,
        calibration_id="cal-lastgood",
        run_id="20261101-023000-aaaaaa",
        model=str(config.model),
        backend="anthropic",
        judge="metric",
        tolerance=config.tolerance,
        mode=config.mode,
        classes={"extraction": certified("extraction", "prune", 0.5)},
        default=certified("default", "safe", None),
    )
    good = stamp(good, timedelta(days=config.max_policy_age or 0))
    write_policy(good, Path(config.reports) / "policy")
    return good

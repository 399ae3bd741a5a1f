"""Publishing with the last good policy in mind (see `tokenlens.decision.carryover`).

A run's fresh policy is dated and merged with the policy in force (`<reports>/policy/
latest.json`) before it is published: classes this run could not measure keep their last
certified entry until its age limit. A run that stops before measuring anything (the spend
cap) re-publishes the policy in force with every certified entry marked carried over, so
the proxy's dashboard and `/metrics` say since when nothing was re-certified.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from tokenlens.config import CalibrationConfig
from tokenlens.decision.carryover import carried_lines, carry_everything, carry_over
from tokenlens.errors import PolicyError
from tokenlens.policy import Policy, age_limit, load_policy, write_policy
from tokenlens.storage import Location, StorageError, location

log = logging.getLogger(__name__)


def policy_in_force(reports: str | Path | Location) -> Policy | None:
    """The published `latest.json`, or None when there is none or it cannot be read (a
    broken file is logged, never carried from)."""
    latest = location(reports).child("policy", "latest.json")
    try:
        if not latest.exists():
            return None
        return load_policy(latest)
    except (PolicyError, StorageError, OSError) as exc:
        log.warning("the published policy cannot be read, nothing is carried over: %s", exc)
        return None


def with_carry_over(
    policy: Policy, config: CalibrationConfig, now: datetime | None = None
) -> Policy:
    """`policy` dated, with the entries this run could not measure carried over."""
    merged = carry_over(
        policy,
        policy_in_force(config.reports),
        max_age=age_limit(config.max_policy_age),
        now=now or datetime.now(UTC),
    )
    for line in carried_lines(merged):
        log.warning("policy entry %s", line)
    return merged


def publish_carried(config: CalibrationConfig, run_id: str, why: str) -> Location | None:
    """After a run that measured nothing: re-publish the policy in force, every certified
    entry carried over with `why`. None when there is no policy in force."""
    previous = policy_in_force(config.reports)
    if previous is None:
        return None
    now = datetime.now(UTC)
    policy = carry_everything(
        previous, why=why, run_id=run_id, max_age=age_limit(config.max_policy_age), now=now
    )
    target = write_policy(policy, location(config.reports).child("policy"))
    for line in carried_lines(policy, now):
        log.warning("policy entry %s", line)
    return target

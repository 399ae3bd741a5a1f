"""The operator's pages say what the product does: the progress interval, the schedule
that deploying switches on, the worker slot a sharded run's parent holds, where a run's
log lines go."""

from __future__ import annotations

from pathlib import Path

import yaml

from tokenlens.calibration.progress import LineProgress

DOCS = Path(__file__).resolve().parents[1] / "docs"
REPO = DOCS.parent


def test_the_progress_interval_is_the_one_the_product_uses() -> None:
    text = " ".join((DOCS / "calibrating-with-claude.md").read_text().split())
    every = LineProgress()._every
    assert f"every {every:g} s" in text and "progress line" in text
    assert "every 30 s instead" not in text


def test_the_schedule_page_warns_that_deploying_switches_the_nightly_on() -> None:
    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    [nightly] = [d for d in spec["deployments"] if d["name"] == "nightly"]
    assert nightly["schedules"][0]["active"] is True
    text = " ".join((DOCS / "schedule.md").read_text().split())
    assert "live as soon as you deploy" in text and "`active: false`" in text
    env = nightly["work_pool"]["job_variables"]["env"]
    assert env["PREFECT_LOGGING_EXTRA_LOGGERS"] == "tokenlens"
    assert "PREFECT_LOGGING_EXTRA_LOGGERS" in text  # what the run's log holds, and why


def test_many_machines_says_the_parent_holds_a_worker_slot() -> None:
    text = " ".join((DOCS / "many-machines.md").read_text().split())
    assert "The parent takes a worker slot too" in text and "N + 1 workers" in text

"""The automation file of docs/schedule.md is a valid Prefect automation that fires on what the
nightly emits when it fails loudly (a Failed flow run of the `calibrate` flow)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
AUTOMATION = REPO / "automations" / "calibration-failed.yaml"


def test_automation_file_validates_and_targets_failed_calibrations() -> None:
    from prefect.events.schemas.automations import AutomationCore, EventTrigger

    automation = AutomationCore.model_validate(yaml.safe_load(AUTOMATION.read_text()))
    trigger = automation.trigger
    assert isinstance(trigger, EventTrigger)
    assert trigger.expect == {"prefect.flow-run.Failed"}
    related = trigger.match_related
    assert not isinstance(related, list)
    assert dict(related.root) == {
        "prefect.resource.role": "flow",
        "prefect.resource.name": "calibrate",
    }
    assert [action.type for action in automation.actions] == ["send-notification"]
    page = (REPO / "docs" / "schedule.md").read_text()
    assert "automations/calibration-failed.yaml" in page

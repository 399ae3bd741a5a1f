"""The automation file of docs/schedule.md is a valid Prefect automation that notifies when a
`calibrate` flow run ends Failed or Crashed (issue 26: crashes were silent).

The second test runs it for real: the session's Prefect server (its triggers and actions
services run in the test server), a Custom Webhook block pointing at a listener on
loopback, the automation created with `prefect automation create --from-file` as
docs/schedule.md says, and flow runs of `calibrate` (and of another flow) ending Crashed and Failed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.flows.conftest import wait_for_messages

REPO = Path(__file__).resolve().parents[2]
AUTOMATION = REPO / "automations" / "calibration-failed.yaml"
PREFECT = str(Path(sys.executable).with_name("prefect"))


def test_automation_file_validates_and_targets_failed_and_crashed_calibrations() -> None:
    from prefect.events.schemas.automations import AutomationCore, EventTrigger

    automation = AutomationCore.model_validate(yaml.safe_load(AUTOMATION.read_text()))
    trigger = automation.trigger
    assert isinstance(trigger, EventTrigger)
    assert trigger.expect == {"prefect.flow-run.Failed", "prefect.flow-run.Crashed"}
    related = trigger.match_related
    assert not isinstance(related, list)
    assert dict(related.root) == {
        "prefect.resource.role": "flow",
        "prefect.resource.name": "calibrate",
    }
    assert [action.type for action in automation.actions] == ["send-notification"]
    page = (REPO / "docs" / "schedule.md").read_text()
    assert "automations/calibration-failed.yaml" in page


def test_a_crashed_or_failed_calibration_notifies_the_webhook(
    notifications: list[dict[str, Any]],
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed, Failed, Running

    received = notifications

    @flow(name="calibrate")
    def calibrate() -> None:
        pass

    @flow(name="something-else")
    def other() -> None:
        pass

    with get_client(sync_client=True) as client:
        for name, which, final in [
            ("crashed", calibrate, Crashed(message="process 4242 is gone (killed?)")),
            ("other-crashed", other, Crashed(message="not a calibration")),
            ("failed", calibrate, Failed(message="extraction: not certified")),
        ]:
            run = client.create_flow_run(which, name=f"notify-{name}", state=Running())
            client.set_flow_run_state(run.id, final, force=True)
    subjects = wait_for_messages(received, 2, timeout=90)

    by_subject = {message["subject"]: message["body"] for message in subjects}
    assert set(by_subject) == {
        "TokenLens calibration Crashed: notify-crashed",
        "TokenLens calibration Failed: notify-failed",
    }, by_subject
    assert "process 4242 is gone" in by_subject["TokenLens calibration Crashed: notify-crashed"]
    time.sleep(2)  # the other flow's crash, had it matched, would have arrived by now
    assert len(received) == 2, received

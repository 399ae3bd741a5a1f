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
NO_LINK = "no link to the run: the Prefect server was started without PREFECT_UI_URL"
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
    # The session's server has no PREFECT_UI_URL: the body says so instead of "None".
    for body in by_subject.values():
        assert "None" not in body and NO_LINK in body, body
    time.sleep(2)  # the other flow's crash, had it matched, would have arrived by now
    assert len(received) == 2, received


def _body(flow_run: object) -> str:
    """The automation's body as the server renders it (its own template filters)."""
    from prefect.server.events.jinja_filters import all_filters
    from prefect.server.utilities.user_templates import (
        register_user_template_filters,
        render_user_template_sync,
    )

    register_user_template_filters(all_filters)
    template = yaml.safe_load(AUTOMATION.read_text())["actions"][0]["body"]
    return render_user_template_sync(template, {"flow_run": flow_run})


def test_the_body_links_the_run_or_says_plainly_that_it_cannot() -> None:
    import uuid

    from prefect.server.schemas.core import FlowRun
    from prefect.server.schemas.states import Failed
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

    run = FlowRun(id=uuid.uuid4(), name="nightly", flow_id=uuid.uuid4(), state=Failed(message="x"))
    with temporary_settings({PREFECT_UI_URL: "http://127.0.0.1:4200"}):
        linked = _body(run)
    assert f"http://127.0.0.1:4200/runs/flow-run/{run.id}" in linked and NO_LINK not in linked
    with temporary_settings(restore_defaults={PREFECT_UI_URL, PREFECT_API_URL}):
        unlinked = _body(run)
    assert "None" not in unlinked and NO_LINK in unlinked


def test_every_documented_server_start_sets_the_ui_url() -> None:
    """`{{ flow_run|ui_url }}` is rendered by the server: it needs PREFECT_UI_URL there."""
    starts = [
        (page.name, line)
        for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        for line in page.read_text().splitlines()
        if "prefect server start --" in line and not line.lstrip().startswith("#")
    ]
    assert starts
    for page, line in starts:
        assert "PREFECT_UI_URL=" in line, f"{page}: {line}"

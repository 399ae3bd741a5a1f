"""The automation file of docs/schedule.md is a valid Prefect automation that notifies when a
`calibrate` flow run ends Failed or Crashed (issue 26: crashes were silent).

The second test runs it for real: the session's Prefect server (its triggers and actions
services run in the test server), a Custom Webhook block pointing at a listener on
loopback, the automation created with `prefect automation create --from-file` as
docs/schedule.md says, and flow runs of `calibrate` (and of another flow) ending Crashed and Failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

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


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:  # the stdlib handler's name
        length = int(self.headers.get("Content-Length", "0"))
        self.received.append(json.loads(self.rfile.read(length) or b"{}"))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A listener on loopback; yields its URL and what it received."""
    received: list[dict[str, Any]] = []
    handler = type("Hook", (_Hook,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def test_a_crashed_or_failed_calibration_notifies_the_webhook(
    prefect_api: str, webhook: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    from prefect import flow
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed, Failed, Running

    url, received = webhook
    block = CustomWebhookNotificationBlock(
        name="tokenlens-test",
        url=url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    )
    block_id = block.save("tokenlens-calibration-hook", overwrite=True)
    spec = yaml.safe_load(AUTOMATION.read_text())
    spec["actions"][0]["block_document_id"] = str(block_id)
    spec["name"] = "tokenlens-calibration-failed-test"
    (tmp_path / "automation.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    done = subprocess.run(
        [PREFECT, "automation", "create", "--from-file", str(tmp_path / "automation.yaml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    @flow(name="calibrate")
    def calibrate() -> None:
        pass

    @flow(name="something-else")
    def other() -> None:
        pass

    try:
        with get_client(sync_client=True) as client:
            ended = {}
            for name, which, final in [
                ("crashed", calibrate, Crashed(message="process 4242 is gone (killed?)")),
                ("other-crashed", other, Crashed(message="not a calibration")),
                ("failed", calibrate, Failed(message="extraction: not certified")),
            ]:
                run = client.create_flow_run(which, name=f"notify-{name}", state=Running())
                client.set_flow_run_state(run.id, final, force=True)
                ended[name] = run
            subjects = _wait_for(received, 2, timeout=90)
    finally:
        with get_client(sync_client=True) as client:
            for automation in client.read_automations_by_name(spec["name"]):
                client.delete_automation(automation.id)

    by_subject = {message["subject"]: message["body"] for message in subjects}
    assert set(by_subject) == {
        "TokenLens calibration Crashed: notify-crashed",
        "TokenLens calibration Failed: notify-failed",
    }, by_subject
    assert "process 4242 is gone" in by_subject["TokenLens calibration Crashed: notify-crashed"]
    time.sleep(2)  # the other flow's crash, had it matched, would have arrived by now
    assert len(received) == 2, received


def _wait_for(received: list[dict[str, Any]], count: int, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while len(received) < count and time.monotonic() < deadline:
        time.sleep(0.25)
    return list(received)

"""A notification listener for the flows' automation tests: a Custom Webhook block posts to
it, and a test reads what it received."""

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


@pytest.fixture
def notifications(
    prefect_api: str, webhook: tuple[str, list[dict[str, Any]]], tmp_path: Path
) -> Iterator[list[dict[str, Any]]]:
    """automations/calibration-failed.yaml created as docs/schedule.md says, notifying
    through a Custom Webhook block to the listener; yields what the listener received."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client

    url, received = webhook
    block = CustomWebhookNotificationBlock(
        name="tokenlens-test",
        url=url,
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
    )
    block_id = block.save("tokenlens-calibration-hook", overwrite=True)
    env = {**os.environ, "PREFECT_API_URL": prefect_api}
    # The id as the automation file's comment says to read it.
    assert (
        "prefect block inspect custom-webhook/<your-block-name> -o json" in AUTOMATION.read_text()
    )
    shown = subprocess.run(
        [PREFECT, "block", "inspect", "custom-webhook/tokenlens-calibration-hook", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["id"] == str(block_id)
    spec = yaml.safe_load(AUTOMATION.read_text())
    spec["actions"][0]["block_document_id"] = str(block_id)
    spec["name"] = "tokenlens-calibration-failed-test"
    (tmp_path / "automation.yaml").write_text(yaml.safe_dump(spec))
    done = subprocess.run(
        [PREFECT, "automation", "create", "--from-file", str(tmp_path / "automation.yaml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        yield received
    finally:
        with get_client(sync_client=True) as client:
            for automation in client.read_automations_by_name(spec["name"]):
                client.delete_automation(automation.id)


def wait_for_messages(
    received: list[dict[str, Any]], count: int, timeout: float
) -> list[dict[str, Any]]:
    """What the webhook received once it holds `count` messages (or `timeout` passed)."""
    deadline = time.monotonic() + timeout
    while len(received) < count and time.monotonic() < deadline:
        time.sleep(0.25)
    return list(received)

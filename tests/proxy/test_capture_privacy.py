"""Capture and privacy: off writes nothing; on, redaction runs before the write; opt-out works.

Each test runs the real `tokenlens serve` (debug logging on) in a scratch directory with
its own HOME and TMPDIR, sends canaries through the official SDK, stops the proxy (which
drains the capture writer), then searches every file the process could have written.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tokenlens.captures import CapturedRequest, read_records
from tokenlens.testing import FakeAnthropic

from .conftest import MODEL, free_port


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    return tmp_path, env


def _serve(root: Path, env: dict[str, str], upstream: str, *extra: str) -> tuple[str, Any]:
    """Start `tokenlens -v serve` logging to root/serve.log; returns (base URL, process)."""
    port = free_port()
    log_file = (root / "serve.log").open("ab")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "tokenlens", "-v", "serve", "--upstream", upstream),
            *("--port", str(port), *extra),
        ],
        cwd=root,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, "tokenlens serve exited"
        try:
            httpx.get(f"{base}/tokenlens/feed.json", timeout=1).raise_for_status()
            return base, process
        except httpx.HTTPError:
            assert time.monotonic() < deadline, "tokenlens serve did not start"
            time.sleep(0.05)


def _stop(process: Any) -> None:
    process.terminate()
    process.wait(timeout=20)


def _body(text: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 100,
        "system": f"Internal note: {text}",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"The ledger lists {text} twice.\n\nNothing else."},
                    {"type": "text", "text": f"How often is {text} listed?"},
                ],
            }
        ],
    }


def _send(base: str, text: str, **kwargs: Any) -> None:
    client = anthropic.Anthropic(api_key="sk-ant-capture-test-key", base_url=base, max_retries=0)
    client.messages.create(**_body(text), **kwargs)
    with client.messages.stream(**_body(text), **kwargs) as stream:
        stream.until_done()
    client.close()


def _files_with(root: Path, needle: str) -> list[Path]:
    return [
        path for path in root.rglob("*") if path.is_file() and needle.encode() in path.read_bytes()
    ]


def test_with_capture_off_a_canary_is_written_nowhere(
    fake_anthropic: FakeAnthropic, scratch: tuple[Path, dict[str, str]]
) -> None:
    root, env = scratch
    canary = f"CANARY-{uuid.uuid4().hex}"
    base, process = _serve(root, env, fake_anthropic.base_url)
    try:
        _send(base, canary)
    finally:
        _stop(process)
    log = (root / "serve.log").read_text()
    assert "Application startup complete" in log and "CAPTURE IS ON" not in log
    assert _files_with(root, canary) == []
    assert not list(root.rglob("capture-*.jsonl"))


def test_with_capture_on_redaction_runs_before_the_write_and_opt_out_is_honoured(
    fake_anthropic: FakeAnthropic, scratch: tuple[Path, dict[str, str]]
) -> None:
    root, env = scratch
    hexpart = uuid.uuid4().hex
    canary = f"CANARY-{hexpart}"
    opted_out = f"OPTOUT-{uuid.uuid4().hex}"
    email, key, card = "ana.lopez@example.org", f"sk-ant-api03-{hexpart}", "4111 1111 1111 1111"
    rules = root / "redact.txt"
    rules.write_text("# our ticket canaries\nCANARY-[0-9a-f]{32}\n")
    store = root / "captures"
    base, process = _serve(
        root,
        env,
        fake_anthropic.base_url,
        "--capture",
        str(store),
        "--capture-sample",
        "1",
        "--capture-redact",
        str(rules),
    )
    try:
        _send(base, f"{canary} for {email} with {key} and card {card}")
        _send(base, opted_out, extra_headers={"x-tokenlens-capture": "off"})
    finally:
        _stop(process)
    log = (root / "serve.log").read_text()
    assert "CAPTURE IS ON: 100% OF MESSAGES REQUESTS" in log
    assert "capture: 2 requests written" in log  # counts only
    for secret in (canary, email, key, card, opted_out):
        assert _files_with(root, secret) == [], secret
    records = [r for r in read_records(store) if isinstance(r, CapturedRequest)]
    assert len(records) == 2  # plain and streamed; the opted-out pair is not there
    for record in records:
        question = record.body["messages"][0]["content"][1]["text"]
        assert (
            question == "How often is [REDACTED:custom] for [REDACTED:email] with "
            "[REDACTED:api-key] and card [REDACTED:digits] listed?"
        )
        assert record.body["system"].startswith("Internal note: [REDACTED:custom]")
        assert record.answer and "CANARY" not in record.answer
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    for part in store.iterdir():
        assert stat.S_IMODE(part.stat().st_mode) == 0o600


def test_bad_redaction_rules_stop_the_proxy_before_it_binds(
    scratch: tuple[Path, dict[str, str]],
) -> None:
    root, env = scratch
    rules = root / "redact.txt"
    rules.write_text("fine-[0-9]+\n(unclosed\n")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "tokenlens", "serve", "--capture", str(root / "c")),
            *("--capture-redact", str(rules), "--port", str(free_port())),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"{rules}:2: not a valid regular expression" in result.stderr


def test_capture_flags_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenlens.cli import main

    assert main(["serve", "--capture-redact", "rules.txt"]) == 2
    assert "--capture-redact needs --capture STORE" in capsys.readouterr().err
    assert main(["serve", "--capture", "c", "--capture-sample", "1.5"]) == 2
    assert "capture_sample must be within [0, 1]" in capsys.readouterr().err

"""`tokenlens fake-upstream`: the loopback Anthropic server as a command, in a real process,
driven by the official SDK (on main before this change there was no such command)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import pytest

from tokenlens.cli import main


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def fake_upstream(*args: str) -> Iterator[tuple[anthropic.Anthropic, subprocess.Popen[str]]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tokenlens", "fake-upstream", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "fake-upstream did not listen"
            time.sleep(0.05)
    client = anthropic.Anthropic(
        api_key="sk-ant-anything", base_url=f"http://127.0.0.1:{port}", max_retries=0
    )
    try:
        yield client, process
    finally:
        client.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=30)


QUESTION = "Region 7 is run by Person7. Region 8 is run by Person8.\n\nWho runs region 7?"


def test_it_answers_like_the_messages_api_with_the_latency_asked() -> None:
    with fake_upstream("--latency", "0.2") as (client, process):
        started = time.monotonic()
        reply = client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=[{"role": "user", "content": QUESTION}],
        )
        assert time.monotonic() - started >= 0.2
        assert reply.content[0].type == "text" and "Person7" in reply.content[0].text
        with client.messages.stream(
            model="claude-haiku-4-5",
            max_tokens=100,
            messages=[{"role": "user", "content": QUESTION}],
        ) as stream:
            assert "Person7" in "".join(stream.text_stream)
        counted = client.messages.count_tokens(
            model="claude-haiku-4-5", messages=[{"role": "user", "content": QUESTION}]
        )
        assert counted.input_tokens > 0
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    assert "fake Anthropic API on http://127.0.0.1:" in out and "Not Claude" in out


def test_it_injects_the_faults_asked() -> None:
    with fake_upstream("--faults", "1:503") as (client, _):
        with pytest.raises(anthropic.InternalServerError) as caught:
            client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=50,
                messages=[{"role": "user", "content": QUESTION}],
            )
        assert caught.value.status_code == 503


def test_bad_fault_specs_fail_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fake-upstream", "--faults", "2"]) == 2
    assert "--faults 2: the rate must be within [0, 1]" in capsys.readouterr().err
    assert main(["fake-upstream", "--faults", "0.1:418"]) == 2
    assert "unknown kind 418" in capsys.readouterr().err

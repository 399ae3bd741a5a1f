"""`serve --capture` end to end: SDK traffic, captures, `tasks harvest`, validate, dry run."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic

from tokenlens.captures import CapturedReplay, CapturedRequest, read_records
from tokenlens.cli import main as cli_main
from tokenlens.harvest import MODEL_ANSWER_TAG, harvest
from tokenlens.judge import PairGrade, Position
from tokenlens.proxy import capture as capture_module
from tokenlens.proxy.capture import Capture
from tokenlens.proxy.settings import ProxySettings
from tokenlens.tasks import load_tasks
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, MODEL, ProxyServer

StartProxy = Callable[..., ProxyServer]

#: Distinct documents (different templates), each several paragraphs the ladder may cut.
DOCS = {
    "billing": (
        "Invoice policy.  Customers   are billed on the first working day of each month.\n\n"
        "Late payments accrue a fee of two percent after thirty days, and accounts more than "
        "ninety days overdue are suspended until the balance is settled in full.\n\n"
        "Refunds are issued to the original payment method within ten business days."
    ),
    "deploy": (
        "Deployment notes.   The service is deployed with a blue-green strategy behind the "
        "load balancer.\n\nThe health check polls /healthz every five seconds and a node is "
        "drained after three consecutive failures.\n\nRollbacks switch traffic back to the "
        "previous colour and keep the failed colour running for inspection."
    ),
    "garden": (
        "Community garden rules.  Plots are assigned in March   by lottery among members.\n\n"
        "Each member must weed their plot at least once a fortnight; neglected plots are "
        "reassigned after two written warnings.\n\nTools live in the green shed, whose code "
        "changes every season and is posted on the noticeboard."
    ),
    "travel": (
        "Travel itinerary.   The team flies to Lisbon on Tuesday and stays at the riverside "
        "hotel for four nights.\n\nThe workshop runs Wednesday and Thursday in the old "
        "customs house; Friday is free for the city.\n\nReturn flights leave Saturday morning "
        "and the taxi is booked for seven o'clock."
    ),
    "budget": (
        "Quarterly budget.   Marketing was allotted 12,000 dollars and spent 9,500.\n\n"
        "Engineering was allotted 30,000 dollars and spent 31,200 because of a hardware "
        "refresh.\n\nOperations was allotted 8,000 dollars and spent 6,100, mostly on "
        "cleaning contracts and office supplies."
    ),
}


class ScriptedJudge:
    name = "scripted"

    def grade_pair(self, **kwargs: Any) -> PairGrade:
        return PairGrade(
            judge=self.name,
            grade_clear=90.0,
            grade_comp=90.0,
            reasoning="scripted",
            note="ok",
            positions=(Position(clear_is_b=False, grade_a=90.0, grade_b=90.0),),
        )


def _body(doc: str, question: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 200,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": doc}, {"type": "text", "text": question}],
            }
        ],
    }


def _sdk(proxy: ProxyServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)


def _stream(client: anthropic.Anthropic, body: dict[str, Any], **kwargs: Any) -> str:
    with client.messages.stream(**body, **kwargs) as stream:
        return "".join(stream.text_stream)


def test_captured_traffic_harvests_into_a_valid_task_file(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path, tmp_path: Path
) -> None:
    captures = tmp_path / "captures"
    judged = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            judge=True,
            judge_sample=1.0,
            capture_store=str(captures / "judged"),
            capture_sample=1.0,
        ),
        judge_factory=lambda headers: ScriptedJudge(),
    )
    client = _sdk(judged)
    by_header = {"x-tokenlens-class": "code-context"}  # policy: none -> `safe` at most
    ticket = "\n\nFiled under ticket {} on {}, owner id {}."
    client.messages.create(
        **_body(DOCS["deploy"] + ticket.format(48213, "2026-11-02", "a91f03c2d4"), "How often?"),
        extra_headers=by_header,
    )
    _stream(client, _body(DOCS["garden"], "Where are the tools kept?"), extra_headers=by_header)
    # classified by content (extraction, prune@0.5): the answer is to a compressed prompt,
    # so the reference comes from the shadow judge's uncompressed replay
    client.messages.create(**_body(DOCS["travel"], "Which city does the team fly to?"))
    # the same template with other ids: a near-duplicate
    client.messages.create(
        **_body(DOCS["deploy"] + ticket.format(99120, "2026-11-29", "77be0a1f90"), "How often?"),
        extra_headers=by_header,
    )
    # one paragraph, all question: nothing the ladder may compress
    client.messages.create(
        model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "Say hello."}]
    )
    # opted out by the application
    client.messages.create(
        **_body(DOCS["billing"], "When are refunds issued? OPTED-OUT-MARKER"),
        extra_headers={"x-tokenlens-capture": "off"},
    )
    judged.wait_idle()

    passthrough = start_proxy(  # no policy: the capture classifies for the record
        ProxySettings(
            upstream=fake_anthropic.base_url,
            capture_store=str(captures / "plain"),
            capture_sample=1.0,
        )
    )
    numeric = _stream(
        _sdk(passthrough), _body(DOCS["budget"], "How much did engineering overspend in total?")
    )
    summary = _sdk(passthrough).messages.create(
        **_body(DOCS["billing"], "Summarize the invoice policy.")
    )
    capture = passthrough.app.state.capture
    assert isinstance(capture, Capture) and capture.counts["dropped_queue_full"] == 0
    judged.stop()
    passthrough.stop()  # lifespan shutdown drains each writer and closes its part file

    parts = sorted(captures.rglob("capture-*.jsonl"))
    assert parts, "nothing was captured"
    for part in parts:
        assert stat.S_IMODE(part.stat().st_mode) == 0o600
        assert "OPTED-OUT-MARKER" not in part.read_text()
    records = list(read_records(captures))
    requests = [r for r in records if isinstance(r, CapturedRequest)]
    replays = [r for r in records if isinstance(r, CapturedReplay)]
    assert len(requests) == 7
    # compressed (code-context gets the `safe` floor, extraction prune@0.5): the answer the
    # client got is to another prompt; the shadow judge's replay supplies the reference
    compressed = [r for r in requests if r.arm != "none"]
    assert len(compressed) == 4 and all(r.answer is None for r in compressed)
    assert {r.body_sha256 for r in replays} == {r.body_sha256 for r in compressed}
    decided = {(r.task_class, r.class_source, r.class_decided_by) for r in requests}
    assert ("code-context", "header", "proxy") in decided
    assert ("extraction", "rules", "proxy") in decided
    assert ("numeric-reasoning", "rules", "capture") in decided
    answers = {r.answer for r in requests if r.arm == "none"}
    assert numeric in answers  # streamed, relayed unchanged: the answer is the reference
    assert summary.content[0].text in answers  # type: ignore[union-attr]
    extraction = next(r for r in requests if r.task_class == "extraction")
    assert extraction.arm == "prune@0.5" and extraction.answer is None
    assert extraction.body["messages"][0]["content"][0]["text"] == DOCS["travel"]  # as received

    out = tmp_path / "harvested.jsonl"
    assert cli_main(["tasks", "harvest", str(captures), "--out", str(out)]) == 0
    tasks = load_tasks(out)
    assert {t.task_class for t in tasks} == {
        "code-context",
        "extraction",
        "numeric-reasoning",
        "summarization",
    }
    assert len(tasks) == 5  # 7 captured: one near-duplicate, one with nothing compressible
    assert all(MODEL_ANSWER_TAG in t.tags for t in tasks)
    travel = next(t for t in tasks if t.task_class == "extraction")
    assert "reference-from:replay" in travel.tags
    assert travel.question == "Which city does the team fly to?"
    assert travel.context == DOCS["travel"]
    assert cli_main(["tasks", "validate", str(out)]) == 0
    balanced = tmp_path / "balanced.jsonl"
    assert (
        cli_main(["tasks", "harvest", str(captures), "--out", str(balanced), "--per-class", "1"])
        == 0
    )
    assert len(load_tasks(balanced)) == 4

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # offline, the default scope narrows to one class: --classes all keeps the file's
    argv = ["calibrate", "--dry-run", "--tasks", str(out), "--classes", "all"]
    dry = subprocess.run(
        [sys.executable, "-m", "tokenlens", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert dry.returncode == 0, dry.stderr
    assert "code-context" in dry.stdout and "numeric-reasoning" in dry.stdout


def test_a_full_queue_drops_captures_and_never_fails_the_request(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, tmp_path: Path
) -> None:
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            capture_store=str(tmp_path / "captures"),
            capture_sample=1.0,
        )
    )
    capture = proxy.app.state.capture
    assert isinstance(capture, Capture)
    # Stop the writer, then fill its (shrunk) queue: every capture now finds it full.
    capture._queue.put(capture_module._STOP)
    capture._thread.join(5)
    capture._queue.maxsize = 1
    capture._queue.put_nowait(object())
    client = _sdk(proxy)
    for _ in range(3):
        answer = client.messages.create(**_body(DOCS["garden"], "Where are the tools kept?"))
        assert answer.content[0].text  # type: ignore[union-attr]
        _stream(client, _body(DOCS["garden"], "Where are the tools kept?"))
    assert capture.counts["dropped_queue_full"] == 6
    assert not list((tmp_path / "captures").rglob("capture-*.jsonl"))


def test_a_url_store_receives_whole_part_files(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy
) -> None:
    """An fsspec URL (here the in-process `memory://` filesystem; s3:// works the same)."""
    import fsspec

    url = f"memory://captures-{os.getpid()}-{id(start_proxy)}"
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, capture_store=url, capture_sample=1.0)
    )
    client = _sdk(proxy)
    for question in ("Where are the tools kept?", "Who assigns plots?"):
        client.messages.create(**_body(DOCS["garden"], question))
    _stream(client, _body(DOCS["garden"], "When are plots assigned?"))
    fs = fsspec.filesystem("memory")
    assert not fs.glob(f"{url}/capture-*.jsonl")  # nothing uploaded until the part closes
    proxy.stop()
    (part,) = fs.glob(f"{url}/capture-*.jsonl")
    lines = fs.cat(part).decode().splitlines()
    records = [CapturedRequest.model_validate_json(line) for line in lines]
    assert [r.class_decided_by for r in records] == ["capture"] * 3
    assert all(r.answer for r in records)
    tasks, report = harvest(url)  # harvest reads the URL too
    assert len(tasks) == 3 and report.dropped["duplicate"] == 0  # one document, 3 questions
    fs.rm(url, recursive=True)

"""`tasks harvest` on hand-written capture records; near-duplicates; redaction rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenlens.captures import CaptureError, body_digest
from tokenlens.errors import TokenLensError
from tokenlens.harvest import MODEL_ANSWER_TAG, harvest
from tokenlens.neardup import find_duplicates, normalize
from tokenlens.proxy.redact import Redactor, load_rules

PARAGRAPHS = [
    "The warehouse in Leeds ships orders placed before noon on the same day.",
    "Returns are accepted within thirty days if the packaging is unopened.",
    "Gift cards cannot be exchanged for cash and never expire.",
    "Orders over fifty pounds ship free within the mainland.",
]


def _request(
    body: dict[str, Any], answer: str | None, task_class: str = "extraction", **kw: Any
) -> dict[str, Any]:
    return {
        "kind": "request",
        "v": 1,
        "time": kw.pop("time", 1.0),
        "body_sha256": body_digest(body),
        "model": "claude-haiku-4-5",
        "task_class": task_class,
        "class_source": "header",
        "class_decided_by": "proxy",
        "arm": "none" if answer else "prune@0.5",
        "body": body,
        "answer": answer,
        **kw,
    }


def _body(context: str, question: str, **extra: Any) -> dict[str, Any]:
    content = [{"type": "text", "text": context}, {"type": "text", "text": question}]
    return {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": content}],
        **extra,
    }


def _store(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    store = tmp_path / "captures"
    store.mkdir(parents=True)
    part = store / "capture-20261130T000000Z-1-00001.jsonl"
    part.write_text("".join(json.dumps(r) + "\n" for r in records))
    return store


def test_a_captured_request_becomes_a_task_cut_as_the_ladder_sees_it(tmp_path: Path) -> None:
    single = {
        "model": "m",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": "Earlier question?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Earlier answer."}]},
            {"role": "user", "content": "\n\n".join(PARAGRAPHS) + "\n\nDo gift cards expire?"},
        ],
    }
    store = _store(tmp_path, [_request(single, "  They never expire. ")])
    tasks, report = harvest(store)
    (task,) = tasks
    assert task.question == "Do gift cards expire?"
    assert task.context == "\n\n".join(PARAGRAPHS)
    assert task.system == "You are terse." and task.reference == "They never expire."
    assert [(t.role, t.content) for t in task.history] == [
        ("user", "Earlier question?"),
        ("assistant", "Earlier answer."),
    ]
    assert MODEL_ANSWER_TAG in task.tags and "class-source:header" in task.tags
    assert report.kept == {"extraction": 1}


def test_drops_are_counted_by_reason(tmp_path: Path) -> None:
    context = "\n\n".join(PARAGRAPHS)
    frozen = _body(context, "Q?")
    frozen["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    replayed = _body("A different text about ferries.\n\nThey leave hourly from pier two.", "When?")
    records = [
        _request(_body(context, "Who ships?"), None),  # compressed, never replayed
        _request(frozen, "x"),  # under a cache breakpoint: nothing compressible
        _request(
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}, "x"
        ),
        _request(_body("Short.", "Q?"), "x"),  # below --min-context
        _request(replayed, None),
        {
            "kind": "replay",
            "v": 1,
            "time": 2.0,
            "body_sha256": body_digest(replayed),
            "answer": "Hourly.",
        },
    ]
    tasks, report = harvest(_store(tmp_path, records), min_context=5)
    assert [t.reference for t in tasks] == ["Hourly."]
    assert "reference-from:replay" in tasks[0].tags
    assert report.dropped == {
        "no_reference": 1,
        "nothing_compressible": 2,
        "short_context": 1,
        "duplicate": 0,
    }


def test_near_duplicates_and_per_class_balance(tmp_path: Path) -> None:
    base = "\n\n".join(PARAGRAPHS)
    records = [
        _request(
            _body(base + f"\n\nOrder {n} for customer {n * 7}.", "Ships when?"),
            "Same day.",
            time=float(n),
        )
        for n in range(1, 6)  # one template, five ids
    ]
    edited = base.replace("Leeds", "York")  # one word of free text differs
    records.append(_request(_body(edited, "Ships when?"), "Same day.", time=9.0))
    other = "Meeting minutes {}.\n\nThe board approved the new logo.\n\nBudget talks move to May."
    records += [
        _request(
            _body(other.format(17), "What was approved?"), "Logo.", "summarization", time=10.0
        ),
        _request(_body(other.format(18), "What was approved?"), "x", "summarization", time=11.0),
    ]
    records.append(_request(_body(base, "Do gift cards expire?"), "Never.", time=12.0))
    tasks, report = harvest(_store(tmp_path, records))
    assert report.dropped["duplicate"] == 6  # four ids + the edit; the second minutes
    # another question about the same document is another task
    assert [t.task_class for t in tasks] == ["extraction", "summarization", "extraction"]
    more = [
        _request(
            _body(f"Unrelated text number {word}.\n\nIt talks about {word} only.", "Q?"),
            "A",
            time=20.0 + i,
        )
        for i, word in enumerate(["apples", "engines", "rivers", "poetry"])
    ]
    balanced, report = harvest(_store(tmp_path / "b", records[:1] + more), per_class=2, seed=1)
    assert len(balanced) == 2 and report.dropped["over_per_class"] == 3


def test_minhash_catches_edits_that_normalisation_misses() -> None:
    text = " ".join(PARAGRAPHS * 3)
    assert normalize("Order 1234 at 10:30, id 9f8e7d6c5b") == "order # at #, id #"
    copies = [text, text.replace("Leeds", "York"), "A wholly different sentence about boats."]
    assert find_duplicates(copies) == [None, 0, None]
    assert find_duplicates(copies, threshold=1.0) == [None, None, None]


def test_a_bad_capture_line_is_named(tmp_path: Path) -> None:
    store = _store(tmp_path, [{"kind": "request", "v": 1}])
    with pytest.raises(CaptureError, match=r"capture-.*\.jsonl:1: field '"):
        harvest(store)
    with pytest.raises(CaptureError, match="no capture store"):
        harvest(tmp_path / "missing")


def test_builtin_and_custom_redaction(tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("# comment\n\nPROJECT-[A-Z]{4}\n")
    redactor = Redactor(load_rules(rules))
    text = (
        "Mail bo.svensson@mail.example.se, key sk-ant-api03-abcdefghijklmnop1234, "
        "AWS AKIAABCDEFGHIJKLMNOP, api_key = 'zzzzyyyyxxxx', card 4111-1111-1111-1111, "
        "phone +46 701234567, project PROJECT-ABCD, year 2026 and order 12345."
    )
    assert redactor.text(text) == (
        "Mail [REDACTED:email], key [REDACTED:api-key], AWS [REDACTED:api-key], "
        "api_key = '[REDACTED:api-key]', card [REDACTED:digits], phone +[REDACTED:digits], "
        "project [REDACTED:custom], year 2026 and order 12345."
    )
    body = {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": text}]}
    redacted = redactor.request(body)
    assert redacted["model"] == body["model"] and "PROJECT-ABCD" not in json.dumps(redacted)
    # a key where the model goes is no model name: redacted like any text (issue 24)
    assert redactor.request({**body, "model": "sk-ant-not-a-key-but-schema"})["model"] == (
        "[REDACTED:api-key]"
    )
    rules.write_text("ok\n[a-\n")
    with pytest.raises(TokenLensError, match=r"rules\.txt:2: not a valid regular expression"):
        load_rules(rules)
    rules.write_text("x*\n")
    with pytest.raises(TokenLensError, match="matches the empty string"):
        load_rules(rules)

"""The feature function: what it reads, that it is bounded and stable across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tokenlens.classifier.features import feature_names, hashed
from tokenlens.classifier.rules import SCAN_CHARS


def _body(
    context: str, question: str, *, turns: int = 0, system: str | None = None
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": context}, {"type": "text", "text": question}],
        }
    )
    body: dict[str, Any] = {"model": "m", "max_tokens": 10, "messages": messages}
    if system:
        body["system"] = system
    return body


CODE = "```python\ndef total(xs):\n    return sum(xs)\n\nclass Cart:\n    pass\n```\n"


def test_features_read_question_shape_history_system_and_rules() -> None:
    names = feature_names(
        _body(CODE * 3, "How many items does total() count?", turns=4, system="Reply in JSON.")
    )
    assert {"q0:how", "q01:how_many", "q:items", "q:ends?", "turns:4-7", "sys:yes"} <= names
    assert "s:json" in names and "c:fence:4-7" in names
    assert "rule:chat-history" in names  # what the hand-written rules say is one feature
    assert any(n.startswith("cue:numeric:") and not n.endswith(":0") for n in names)
    plain = feature_names(_body("Plain prose about a lease.", "Summarize the lease."))
    assert {"turns:0", "c:fence:0", "cue:summary:1"} <= plain and "sys:yes" not in plain


def test_features_only_read_a_bounded_prefix() -> None:
    """A 10 MB context has exactly the features of its first SCAN_CHARS characters."""
    huge = "word " * 2_000_000
    assert feature_names(_body(huge, "Who?")) == feature_names(_body(huge[:SCAN_CHARS], "Who?"))


def test_vector_is_unit_length_and_sorted() -> None:
    slots, weight = hashed(_body(CODE, "What does total return?"))
    assert slots == sorted(set(slots))
    assert abs(len(slots) * weight**2 - 1.0) < 1e-12


def test_hashing_is_stable_across_processes() -> None:
    """crc32, not Python's salted hash(): a bundle fitted in one process scores in another."""
    body = _body(CODE, "What does total return?", system="Be brief.")
    code = (
        "import json, sys\n"
        "from tokenlens.classifier.features import hashed\n"
        "print(json.dumps(hashed(json.loads(sys.stdin.read()))[0]))\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(body),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert json.loads(other.stdout) == hashed(body)[0]

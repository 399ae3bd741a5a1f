"""Every model-free rung's exact output, pinned by hash: speed work must not change a byte.

The digests in ``data/golden_ladder.json`` were computed from the ladder as it was before
the hot path was optimised. Each arm's digest covers, over a fixed corpus (a frozen copy
of the 35-task starter set, ``data/golden_tasks.jsonl``, so that editing the live task
set does not move the pins; the ladder fixtures; CRLF copies of them; a few hundred
seeded random documents mixing every block kind), the output text, token counts and
block counts of
`compress_text`, and the body and counts of `compress_request` on each task as a
two-block and as a one-piece request. The segmentation (kinds and texts) is pinned too.

An intended output change must regenerate the file on purpose and say why in its commit:
``python tests/compress/test_golden.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.compress import Arm, compress_request, compress_text
from tokenlens.compress.blocks import segment
from tokenlens.tasks import load_tasks

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden_ladder.json"
GOLDEN_TASKS = DATA / "golden_tasks.jsonl"  # the starter set as of the pins (35 tasks)
ARMS = (
    "control",
    "safe",
    "minify",
    "dedup",
    "prune@0.8",
    "prune@0.5",
    "prune@0.2",
    "select@0.8",
    "select@0.5",
    "select@0.2",
)

#: Lines the random documents are made of: every block kind, and the awkward cases.
_PIECES = (
    "The Orchard service writes readings to the store, and it basically grew a lot.",
    "Maria Lopez approved release 3.8.1 on 12 April; call `load_config()` first.",
    "It was   quite   a lot more than anybody   expected.   ",
    "Why? Because the cache_key changed. See https://example.com/docs for more.",
    "- first item with 42 widgets",
    "  - nested item, really simple",
    "1. numbered step: run make deploy",
    "> quoted reply from Bob, who said the cost was low.",
    "> > deeper quote repeated in the thread of the email",
    "# Heading one",
    "### Heading three   ",
    "=================",
    "-----",
    "* * * * *",
    "────────────",
    "```python",
    "def f(x):  ",
    "    return x  +  1",
    "```",
    "~~~",
    "```json",
    '{"a": 1,   "b": [1, 2,  3]}',
    '  "key":   "va  lue",',
    "| name   | value  |",
    "|--------|:------:|",
    "| alpha  | 1.50   |",
    "<div class='x'>hello</div>",
    "<note>",
    "</note>",
    "<!DOCTYPE html>",
    "<!-- a comment -->",
    "Traceback (most recent call last):",
    '  File "app.py", line 12, in main',
    "ValueError: bad input",
    "2024-05-01 12:00:01 INFO started worker 1",
    "2024-05-01 12:00:02 INFO started worker 2",
    "2024-05-01 12:00:03 INFO started worker 3",
    "diff --git a/x.py b/x.py",
    "@@ -1,3 +1,4 @@",
    "+added line",
    "    indented code line;",
    "\tx = {y};",
    "SELECT id FROM users WHERE name = 'x';",
    "const total = items.reduce((a, b) => a + b, 0);",
    "Thanks,",
    "Thanks,",
    "The same boilerplate footer line that appears under every message of the thread.",
    "The same boilerplate footer line that appears under every message of the thread.",
    "   ",
    "",
    "",
    "",
    "Ünïcödé prose with émphasis — and “quotes”, plus 12% and $1,200.",
    "A [NEW1] marker and [link](http://a.b) and <b>bold</b> in prose.",
)


def _random_documents(count: int, seed: int = 20240501) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        lines = [rng.choice(_PIECES) for _ in range(rng.randint(1, 40))]
        ending = "\r\n" if rng.random() < 0.2 else "\n"
        text = ending.join(lines)
        if rng.random() < 0.7:
            text += ending
        docs.append(text)
    return docs


def corpus() -> list[tuple[str, str | None]]:
    """(text, question) pairs every arm runs on."""
    tasks = load_tasks(GOLDEN_TASKS) + load_tasks(DATA / "tasks.jsonl")
    pairs: list[tuple[str, str | None]] = []
    for task in tasks:
        pairs.append((task.context, task.question))
        pairs.append((task.context.replace("\n", "\r\n"), None))
    guide = (DATA / "guide.md").read_text(encoding="utf-8")
    pairs += [(guide, "How do I roll back a failed deployment?"), (guide, None)]
    pairs += [(doc, None) for doc in _random_documents(300)]
    return pairs


def bodies() -> list[dict[str, Any]]:
    """Request bodies: each task as built for calibration, and as one-piece live traffic."""
    tasks = load_tasks(GOLDEN_TASKS) + load_tasks(DATA / "tasks.jsonl")
    out: list[dict[str, Any]] = []
    for task in tasks:
        body = task.to_request(model="m", max_tokens=64)
        out.append(body)
        one_piece = json.loads(json.dumps(body))
        one_piece["messages"][-1]["content"] = task.context + "\n\n" + task.question
        one_piece["system"] = [{"type": "text", "text": "Be   brief.\n\n\n\nReally."}]
        out.append(one_piece)
    return out


def _records(arm: Arm) -> Iterator[Any]:
    for text, question in corpus():
        r = compress_text(text, arm, question=question)
        yield [
            r.text,
            r.original_tokens,
            r.compressed_tokens,
            r.eligible_blocks,
            r.total_blocks,
            r.eligible_tokens,
        ]
    for body in bodies():
        c = compress_request(body, arm)
        yield [
            c.body,
            c.original_tokens,
            c.compressed_tokens,
            c.reduction,
            c.eligible_blocks,
            c.total_blocks,
            c.question_found,
        ]


def _digest(records: Iterator[Any]) -> str:
    h = hashlib.sha256()
    for record in records:
        h.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def digests() -> dict[str, str]:
    out = {"segment": _digest([[b.kind, b.lang, b.text] for b in segment(t)] for t, _ in corpus())}
    for key in ARMS:
        out[key] = _digest(_records(Arm.parse(key)))
    return out


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    data: dict[str, str] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return data


def test_segmentation_is_unchanged(golden: dict[str, str]) -> None:
    found = _digest([[b.kind, b.lang, b.text] for b in segment(t)] for t, _ in corpus())
    assert found == golden["segment"]


@pytest.mark.parametrize("key", ARMS)
def test_rung_output_is_byte_identical_to_the_pinned_one(key: str, golden: dict[str, str]) -> None:
    assert _digest(_records(Arm.parse(key))) == golden[key], f"{key} output changed"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/compress/test_golden.py --write  (regenerates the digests)")
    GOLDEN.write_text(json.dumps(digests(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")

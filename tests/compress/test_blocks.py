"""The structure-aware gate: lossless segmentation and per-block eligibility."""

from __future__ import annotations

import pytest

from tokenlens.compress.blocks import ELIGIBLE_KINDS, join, segment

SAMPLES = {
    "fence_in_prose": "Intro text here.\n\n```py\nx = 1\n\n\ny = 2\n```\nAfter the fence.\n",
    "unclosed_fence": "Text.\n```\ncode without end\n",
    "crlf": "Line one\r\nline two\r\n\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n",
    "no_final_newline": "Para one.\n\nPara two",
    "table_in_paragraph": "See the table:\n| a | b |\n|---|---|\n| 1 | 2 |\nAnd text after.",
    "xml_tags": "<document>\nThe report says sales grew.\n</document>\n\nWhat grew?",
    "empty": "",
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_segment_is_lossless(name: str) -> None:
    assert join(segment(SAMPLES[name])) == SAMPLES[name]


def test_segment_guide_is_lossless(guide_md: str) -> None:
    assert join(segment(guide_md)) == guide_md


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("```python\nprint('hi')\n```\n", "fence"),
        ("    indented = code\n    more()\n", "code"),
        ("| a | b |\n|---|---|\n| 1 | 2 |\n", "table"),
        ('{"a": 1, "b": [1, 2]}\n', "json"),
        ("diff --git a/x b/x\n@@ -1 +1 @@\n-old\n+new\n", "diff"),
        (
            'Traceback (most recent call last):\n  File "x.py", line 3, in f\nValueError: bad\n',
            "trace",
        ),
        ("java.lang.IllegalStateException: boom\n    at com.acme.Foo.bar(Foo.java:10)\n", "trace"),
        ("2024-05-01 12:00:01 INFO started\n2024-05-01 12:00:02 INFO ready\n", "log"),
        ("def handler(event):\n    return event['body']\n", "code"),
        ("const x = compute(a, b);\nconsole.log(x);\n", "code"),
        ("# Heading\n", "heading"),
        ("- one item\n- another item\n", "list"),
        ("> quoted line\n> another\n", "quote"),
        ("=========\n", "rule"),
        ("Plain prose that explains something to the reader.\n", "prose"),
    ],
)
def test_classification(text: str, kind: str) -> None:
    kinds = [b.kind for b in segment(text) if not b.is_blank]
    assert kinds == [kind]


def test_gate_is_per_block_not_per_document(guide_md: str) -> None:
    blocks = [b for b in segment(guide_md) if not b.is_blank]
    eligible = [b for b in blocks if b.eligible]
    kinds = {b.kind for b in blocks}
    assert {"fence", "table", "prose"} <= kinds
    assert len(eligible) >= 6  # prose paragraphs stay eligible despite fences and tables
    assert all(b.kind in ELIGIBLE_KINDS for b in eligible)
    assert not any(b.eligible for b in blocks if b.kind in {"fence", "table", "heading"})


def test_xml_tag_lines_do_not_disqualify_the_document() -> None:
    blocks = [b for b in segment(SAMPLES["xml_tags"]) if not b.is_blank]
    assert [b.kind for b in blocks] == ["tag", "prose", "tag", "prose"]

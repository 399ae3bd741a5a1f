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


MAN_EXCERPT = "man-curl-excerpt.txt"  # curl(1), curl licence: see the .LICENSE file beside it


def test_an_indented_man_page_is_prose_and_its_example_stays_code() -> None:
    """Man pages indent every paragraph by seven columns; indentation alone is no code."""
    from pathlib import Path

    text = (Path(__file__).parent / "data" / MAN_EXCERPT).read_text(encoding="utf-8")
    blocks = [b for b in segment(text) if not b.is_blank]
    prose = [b for b in blocks if b.kind == "prose"]
    code = [b for b in blocks if b.kind == "code"]
    assert len(prose) >= 8 and len(prose) >= 0.7 * len(blocks)
    assert any("curl -L https://example.com" in b.text for b in code)  # the example
    assert not any("curl -L https://example.com" in b.text for b in prose)


def test_pruning_an_indented_man_page_removes_prose_and_keeps_its_examples() -> None:
    from pathlib import Path

    from tokenlens.compress import Arm, compress_text

    text = (Path(__file__).parent / "data" / MAN_EXCERPT).read_text(encoding="utf-8")
    result = compress_text(text, Arm.parse("prune@0.5"), question="What does -L do?")
    assert result.compressed_tokens <= 0.8 * result.original_tokens
    assert "               curl -L https://example.com\n" in result.text
    assert "curl --login-options 'AUTH=*' imap://example.com" in result.text


@pytest.mark.parametrize(
    "text",
    [
        "    make deploy ENV=staging\n",
        "    timeout = 30\n    retries = 5\n",
        "    total = compute(items, rate)\n    print(total)\n",
        '        Return the value that the caller passed in, unchanged and whole.\n        """\n',
        "    # Walk the items below and add each one of them to the running total.\n"
        "    total += item\n",
        "    SELECT name FROM users WHERE the id is the one that was given.\n",
        "\tThe next line is code: it ends with a brace, so this is code {\n",
        '        raise ValueError("Bad value. Use a positive integer instead of the given one")\n',
        "        result = the sum of every item. It is returned to the caller as is.\n",
    ],
)
def test_indented_text_that_shows_any_sign_of_code_stays_code(text: str) -> None:
    assert [b.kind for b in segment(text) if not b.is_blank] == ["code"]


@pytest.mark.parametrize(
    "text",
    [
        "       If the server reports that the requested page has moved to a different\n"
        "       location, this option will make curl redo the request on the new place.\n",
        "\tThe client sends a request to the server, and the server answers it with a\n"
        "\tstatus line, header fields and an optional body, as this section describes.\n",
        "    > quoted reply from Bob, who said the cost of the move was low.\n",
    ],
)
def test_indented_running_text_is_open_to_the_lossy_rungs(text: str) -> None:
    blocks = [b for b in segment(text) if not b.is_blank]
    assert len(blocks) == 1 and blocks[0].kind in ELIGIBLE_KINDS

"""Properties of each rung (no golden strings)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
from pathlib import Path

import pytest

from tokenlens.compress import Arm, compress_text
from tokenlens.compress.dedup import apply_dedup
from tokenlens.compress.minify import apply_minify, compact_json
from tokenlens.compress.prune import apply_prune
from tokenlens.compress.safe import apply_safe
from tokenlens.compress.select import apply_select
from tokenlens.tokens import estimate_tokens

_spec = importlib.util.spec_from_file_location(
    "ladder_helpers", Path(__file__).with_name("helpers.py")
)
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

RATES = (0.8, 0.7, 0.6, 0.5, 0.4)
MESSY = (
    "Title   with   spaces   \n\n\n\n=================\n\nA paragraph   here.  \t\n"
    "Another line.\n\n\n\n```py\nx  =  1   \n\n\n\ny = 'a    b'\n```\n\n----------\n\n"
    "| a    | b  |\n|------|----|\n| 1    | 2  |\n\n\n"
)
FACTS = (
    "Acme Corporation reported revenue of 4.2 million euros in March 2024. "
    "The weather in the region was generally pleasant and nothing unusual happened. "
    "Maria Lopez was appointed chief financial officer on 12 April. "
    "Most of the staff were quite happy with the new office coffee machine, it seems. "
    "The Berlin office grew to 85 employees. "
    "People often said that the atmosphere was friendly and that lunches were nice.\n"
)


def test_safe_cleans_whitespace_and_decoration() -> None:
    out = apply_safe(MESSY)
    assert "=====" not in out and "-----" not in out.replace("|------|", "")
    assert "\n\n\n" not in out.split("```")[0]
    assert not any(line != line.rstrip() for line in out.splitlines())
    assert "Title with spaces" in out
    # inside a fence only trailing spaces go: inner runs and blank lines are data
    fence = out[out.index("```py") : out.index("```", out.index("```py") + 3) + 3]
    assert "x  =  1\n\n\n\ny = 'a    b'" in fence
    assert estimate_tokens(out) < estimate_tokens(MESSY)


@pytest.mark.parametrize("text", [MESSY, FACTS, "", "  \n\n", "a\r\n\r\n\r\n\r\nb  c\r\n"])
def test_safe_is_idempotent(text: str, guide_md: str) -> None:
    for sample in (text, guide_md):
        once = apply_safe(sample)
        assert apply_safe(once) == once


def test_minify_compacts_json_without_changing_it() -> None:
    text = '{\n  "price": 1.50,\n  "name": "a  b",\n  "tags": [ "x", "y" ]\n}\n'
    out = apply_minify(text)
    assert json.loads(out) == json.loads(text)
    assert "1.50" in out and '"a  b"' in out  # literals copied verbatim
    assert estimate_tokens(out) < estimate_tokens(text)
    assert compact_json("not json") is None


def test_minify_strips_table_padding_and_html_boilerplate(guide_md: str) -> None:
    out = apply_minify(guide_md)
    table = [line for line in out.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in table]
    assert cells[0] == ["Environment", "Nodes", "Traffic share", "Owner"]
    assert all("  " not in row for row in table)
    assert "def rollback(client, version: str) -> None:" in out  # other fences untouched
    html = (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><style>p{}</style>"
        "<script>track()</script></head>\n<body>  <!-- nav -->\n  <p>Hello</p>\n</body></html>"
    )
    stripped = apply_minify(html)
    assert "Hello" in stripped
    assert not re.search(r"script|style|meta|<!--|DOCTYPE", stripped)


def test_dedup_removes_repeats_and_collapses_logs() -> None:
    footer = "This message is confidential and intended only for the named recipient."
    text = (
        f"Hi team, the release is ready for review today.\n\n{footer}\n\n"
        f"> Hi team, the release is ready for review today.\n>\n> {footer}\n\n"
        + "".join(f"12:00:{i:02d} WARN retrying connection to db-1\n" for i in range(10))
        + "\n```\nsame\nsame\nsame\n```\n\n```\nsame\nsame\nsame\n```\n"
    )
    out = apply_dedup(text)
    assert out.count(footer) == 1
    assert out.count("the release is ready") == 1
    assert out.count("WARN retrying") == 2 and "8 similar lines omitted" in out
    assert "12:00:00" in out and "12:00:09" in out
    assert out.count("```\nsame\nsame\nsame\n```") == 2  # code is never deduplicated
    assert apply_dedup(out) == out


@pytest.mark.parametrize("method", ["prune", "select"])
def test_reduction_grows_as_rate_falls(method: str, guide_md: str) -> None:
    reductions = [compress_text(guide_md, Arm(method, r)).reduction for r in RATES]
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(reductions))
    assert reductions[-1] > reductions[0] + 0.15


@pytest.mark.parametrize("method", ["prune", "select"])
@pytest.mark.parametrize("rate", RATES)
def test_code_tables_json_byte_identical(method: str, rate: float, guide_md: str) -> None:
    out = compress_text(guide_md, Arm(method, rate)).text
    helpers.assert_protected_blocks_intact(guide_md, out)


def _numbers_and_entities(text: str) -> set[str]:
    found = set(re.findall(r"\d+(?:[.,]\d+)*", text))
    found |= set(re.findall(r"(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+)*", text))
    return found


@pytest.mark.parametrize("rate", [0.8, 0.7, 0.6])
def test_prune_keeps_numbers_and_entities(rate: float, guide_md: str) -> None:
    for text in (FACTS, guide_md):
        out = apply_prune(text, rate)
        for item in _numbers_and_entities(text):
            for word in item.split():
                assert word in out, f"prune@{rate} lost {word!r}"


@pytest.mark.parametrize("rate", [0.8, 0.7, 0.6])
def test_select_keeps_numbers_and_entities(rate: float) -> None:
    out = apply_select(FACTS, rate)
    assert estimate_tokens(out) < estimate_tokens(FACTS)
    for item in _numbers_and_entities(FACTS):
        assert item in out, f"select@{rate} lost {item!r}"


def test_select_is_question_aware() -> None:
    question = "What was the weather like in the region?"
    out = apply_select(FACTS, 0.3, question)
    assert "weather in the region" in out
    assert "weather" not in apply_select(FACTS, 0.3, None)  # filler without the question


def test_prune_is_question_aware() -> None:
    text = FACTS + "\nThe coffee machine was replaced twice, once in spring and once in autumn.\n"
    out = apply_prune(text, 0.4, "When was the coffee machine replaced?")
    assert "coffee" in out and "machine" in out and "replaced" in out


@pytest.mark.parametrize("arm", ["safe", "minify", "dedup", "prune@0.5", "select@0.5"])
def test_rungs_are_deterministic(arm: str, guide_md: str) -> None:
    first = compress_text(guide_md, Arm.parse(arm), question="How do I roll back?")
    second = compress_text(guide_md, Arm.parse(arm), question="How do I roll back?")
    assert first == second

"""The shortcuts the speed work took give what the long way gives, on every input they
take: the fast path of `split_line`, the token sum over distinct texts, the per-call
memo of repeated paragraphs. (The pinned outputs in test_golden.py and
test_bench_corpora.py check the rungs end to end.)"""

from __future__ import annotations

import random
import sys

from tokenlens.compress.blocks import segment
from tokenlens.compress.rewrite import _LINE_PREFIX, _PREFIX_START, Line, split_line
from tokenlens.tokens import estimate_tokens, estimate_tokens_sum


def _regex_split(line: str) -> Line:
    body = line.rstrip("\r\n")
    match = _LINE_PREFIX.match(body)
    cut = match.end() if match else 0
    return Line(body[:cut], body[cut:], line[len(body) :])


def test_split_line_agrees_with_the_prefix_pattern_whatever_the_first_character() -> None:
    # The fast path takes a line whose first character is none of " \t>-*+" nor a decimal
    # digit to have no prefix: the pattern must match nothing there, after any character.
    match = _LINE_PREFIX.match
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if char in _PREFIX_START or char.isdecimal():
            continue
        assert match(char + " x").end() == match(char + ". x").end() == 0, hex(code)
    for line in ("- a\n", "  b", "\t> c", "7. d", "١) e", "* ", "+\tf\r\n", "x", "", "\n"):
        assert split_line(line) == _regex_split(line), repr(line)


def test_split_line_keeps_prefixes_and_endings() -> None:
    assert split_line("  > - item one\r\n") == Line("  > - ", "item one", "\r\n")
    assert split_line("12) step\n") == Line("12) ", "step", "\n")
    assert split_line("١٢. Arabic-Indic digits\n") == Line("١٢. ", "Arabic-Indic digits", "\n")
    assert split_line("plain prose") == Line("", "plain prose", "")
    assert split_line("\n") == Line("", "", "\n")


def test_token_sum_over_distinct_texts_is_the_sum() -> None:
    rng = random.Random(7)
    pieces = ["The same footer.\n", "Quoted: a reply\r\n", "", "x", "<|endoftext|> text", "é" * 9]
    texts = [rng.choice(pieces) for _ in range(200)]
    assert estimate_tokens_sum(texts) == sum(estimate_tokens(t) for t in texts)
    assert estimate_tokens_sum(iter(texts)) == sum(map(estimate_tokens, texts))
    assert estimate_tokens_sum([]) == 0


def test_a_repeated_paragraph_gets_the_blocks_it_gets_alone() -> None:
    paragraphs = [
        "Plain prose, twice.\n",
        "| a | b |\n|---|---|\n| 1 | 2 |\ntext after the table\n",
        "    indented code;\n",
        "- a list item\n- another\n",
    ]
    text = "\n".join(paragraphs * 3)
    alone = [b for p in paragraphs for b in segment(p)]
    blank = segment("\n")
    expected = []
    for copy in range(3):
        for n, p in enumerate(paragraphs):
            if copy or n:
                expected += blank
            expected += segment(p)
    assert segment(text) == expected
    assert len(alone) < len(expected)

"""The fast segmentation and `safe` agree with the reference (the code before the hot-path
work, kept in reference_ladder.py) on any text, byte for byte and kind for kind.

The golden test pins every rung's output on a fixed corpus; this one throws seeded random
documents at the two parts rewritten for speed, with the awkward characters the corpus
lacks: every line break `splitlines` knows (lone CR, form feed, NEL, U+2028...), Unicode
blanks, tabs, trailing blanks and runs of blank lines.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from tokenlens.compress.blocks import segment
from tokenlens.compress.safe import apply_safe

_spec = importlib.util.spec_from_file_location(
    "ladder_reference", Path(__file__).with_name("reference_ladder.py")
)
assert _spec is not None and _spec.loader is not None
reference = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = reference  # dataclasses look their module up
_spec.loader.exec_module(reference)

_LINES = (
    "Plain prose that ends a sentence. And another one follows it here",
    "It was   quite  a lot\tmore than expected.  ",
    "- item one",
    "  * nested item",
    "3) third step",
    "> quoted",
    ">   > nested quote  ",
    "# Heading",
    "####### not a heading",
    "=====",
    "- - - - -",
    "___",
    "```",
    "```py",
    "```a`b",
    "~~~~",
    "    indented = code;",
    "\tdef f():",
    "if (x) {",
    "}",
    "value => other",
    "and so it maps to =>",
    "f(a)  :  ",
    "call(x) :",
    "| a | b |",
    "|---|:-:|",
    "| 1 | 2 |",
    "<div>",
    "<custom-tag attr='1'>",
    "</p>",
    "<b>bold</b> and <i>it</i>",
    '{"a": [1, 2]}',
    "[1, 2",
    "Traceback (most recent call last):",
    '  File "x.py", line 3, in f',
    "KeyError: 'k'",
    "2024-01-02 10:11:12 WARN disk",
    "ERROR something broke",
    "diff --git a/x b/x",
    "@@ -1 +1 @@",
    "SELECT * FROM t;",
    "$ make test",
    "@decorator",
    "",
    "   ",
    "\t",
    "\u00a0",
    "a\u00a0\u00a0b",
    "x{}[]<>=;$|\\ y",
)
_BREAKS = ("\n", "\n", "\n", "\r\n", "\r", "\x0c", "\x85", "\u2028", "\x1d", "\x0b")


def _documents(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        odd = rng.random() < 0.5
        parts = []
        for _ in range(rng.randint(0, 30)):
            parts.append(rng.choice(_LINES))
            parts.append(rng.choice(_BREAKS) if odd else "\n")
        if rng.random() < 0.3 and parts:
            parts.pop()  # no final line break
        docs.append("".join(parts))
    return docs


@pytest.mark.parametrize("seed", range(4))
def test_segment_matches_the_reference(seed: int) -> None:
    for text in _documents(400, seed):
        fast = [(b.kind, b.text, b.lang) for b in segment(text)]
        slow = [(b.kind, b.text, b.lang) for b in reference.segment(text)]
        assert fast == slow, repr(text)


@pytest.mark.parametrize("seed", range(4))
def test_safe_matches_the_reference(seed: int) -> None:
    for text in _documents(400, seed):
        assert apply_safe(text) == reference.apply_safe(text), repr(text)

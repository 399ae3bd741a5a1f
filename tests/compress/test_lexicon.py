"""`lexicon.word_texts` splits with `str.split` where it can: the same words as the scan."""

from __future__ import annotations

import random
import sys

from tokenlens.compress import lexicon


def test_split_and_the_word_scan_agree_on_every_character() -> None:
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF or chr(code) == "`":
            continue
        text = f"a{chr(code)}b {chr(code)} c{chr(code)}"
        assert lexicon.word_texts(text) == lexicon._WORD.findall(text), hex(code)


def test_split_and_the_word_scan_agree_on_random_lines() -> None:
    alphabet = "ab `\t\u00a0\u2028\u3000\x1c\x85.,-"
    rng = random.Random(27)
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        assert lexicon.word_texts(text) == lexicon._WORD.findall(text), repr(text)

"""The shortcuts of the no-repeat speed work (issue 27, goal 4) give what the long way
gives: prune's budget counted from the words of plain lines (and the line joins it rests
on), prune's ordering by score rank, and the symbol count by deleting bytes. (The pinned
outputs in test_golden.py and test_bench_corpora.py check the rungs end to end.)"""

from __future__ import annotations

import random

import numpy as np

from tokenlens.compress.blocks import _SYMBOLS, _symbol_count
from tokenlens.compress.budget import is_plain, plain_lines, tokens_from_words
from tokenlens.compress.lexicon import word_texts
from tokenlens.compress.prune import _best_first, _collect_words
from tokenlens.compress.rewrite import split_lines
from tokenlens.tokens import estimate_tokens

# Pieces that stress cl100k's pre-tokenizer at a join: newlines and blanks in every order,
# contractions, digits, punctuation runs, characters `isspace` calls blank and the regex
# may not, non-BMP characters and a lone surrogate.
# fmt: off
_PIECES = [
    "\n", "\r\n", "\r", " ", "  ", "\t", "\n\n", " \n", "\n ", "'s", "'ll", "'", "x", "Word",
    "é", "123", "4567", ".", "...", "?!", "-", "—", "(", ")", "`", "<|endoftext|>", "\x1c",
    "\u2028", "\xa0", "\u3000", "😀", "\ud800", "_", "#", "\x0b",
]
# fmt: on


def _joins_exactly(before: str, after: str) -> bool:
    """Do ``before + after`` and the two texts apart encode to the same tokens, end to end?

    Why: `compress.budget` counts a block line by line and relies on it. True when `before`
    ends with a newline and `after` starts with a non-blank: no piece of cl100k's
    pre-tokenizer holds a newline followed by a non-blank (its whitespace pieces end at a
    newline or hold only blanks, its word and number pieces cannot start with a newline,
    its punctuation piece only adds newlines), none looks behind, and the one that looks
    ahead (``\\s+(?!\\S)``) or anchors at the end (``\\s++$``) would take the same trailing
    blanks of `before` as ``\\s*[\\r\\n]`` does; BPE then encodes each piece alone.
    (`isspace` covers more characters than the regex's ``\\s``: safe.)
    """
    return before.endswith("\n") and bool(after) and not after[0].isspace()


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 8)))


def test_a_join_that_joins_exactly_encodes_as_its_parts() -> None:
    rng = random.Random(4)
    tried = 0
    while tried < 3000:
        before, after = _text(rng), _text(rng)
        if not _joins_exactly(before, after):
            continue
        tried += 1
        whole = estimate_tokens(before + after)
        assert whole == estimate_tokens(before) + estimate_tokens(after), (before, after)


def test_best_first_is_a_stable_sort_of_the_negated_scores() -> None:
    rng = np.random.default_rng(7)
    for terms, q_stems, words in ((30, 4, 500), (3, 0, 50), (200, 9, 40), (1, 1, 1), (5, 2, 0)):
        term_score = rng.choice([0.0, 0.5, 1.25, 3.0, 4.0], size=terms) + rng.integers(
            0, 3, size=terms
        )
        hit_bonus = np.where(np.arange(q_stems + 1) > 0, 1.5 * np.arange(q_stems + 1) / 7, 0.0)
        term = rng.integers(0, terms, size=words)
        hits = rng.integers(0, q_stems + 1, size=words)
        score = term_score[term] + hit_bonus[hits]
        expected = np.argsort(-score, kind="stable")
        assert np.array_equal(_best_first(term_score, term, hit_bonus, hits), expected)


def test_symbol_count_is_the_pattern_count() -> None:
    rng = random.Random(8)
    alphabet = "{}[]<>=;$\\|ab é\n\ud800😀"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert _symbol_count(text) == len(_SYMBOLS.findall(text)), text


# Words that stress the pre-tokenizer at a space: contractions, digit runs, punctuation at
# either end (a period before a line ending is one piece with it), code spans with blanks
# inside, letters of other scripts, emoji, a special token's text, control and format
# characters.
# fmt: off
_WORD_PARTS = [
    "a", "Word", "it", "'s", "'", "'ll", "12", "3456", ".", ",", "...", "?!", ":", ")", "(",
    "—", "-", '"', "é", "日本", "😀", "<|endoftext|>", "`x y`", "`a\tb`", "`c  `", "` `",
    "`\xa0d`", "`", "_", "#", "%", "\x00", "\u200b", "\xad",
]
_PREFIXES = ["", "", "", "- ", "* ", "12. ", "> ", "> - ", "  - ", ">", "-\t", "\t"]
_SEPARATORS = [" ", " ", " ", " ", " ", "  ", "\t", "\xa0", "\u3000", "\x1c"]
_ENDINGS = ["\n", "\n", "\r\n", "\r", ""]
# fmt: on


def _line(rng: random.Random, messy: bool) -> str:
    parts = _WORD_PARTS if messy else _WORD_PARTS[:-1]
    words = ["".join(rng.choices(parts, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 6))]
    content = words[0]
    for word in words[1:]:
        content += (rng.choice(_SEPARATORS) if messy else " ") + word
    prefix = rng.choice(_PREFIXES if messy else _PREFIXES[:7])
    return prefix + content + rng.choice(_ENDINGS if messy else _ENDINGS[:3])


def test_plain_lines_count_from_their_words_as_the_tokenizer_counts() -> None:
    rng = random.Random(9)
    plain_blocks = 0
    for n in range(4000):
        block = "".join(_line(rng, messy=n % 2 == 1) for _ in range(rng.randint(1, 4)))
        lines = split_lines(block)
        plain = [is_plain(line, word_texts) for line in lines]
        if all(plain):
            plain_blocks += 1
            found = _collect_words(lines, None, word_texts)
            counted = tokens_from_words(
                lines, plain, found.distinct, found.word, found.cost, found.starts, found.ends
            )
            assert counted == estimate_tokens(block), repr(block)
    assert plain_blocks > 400  # (of 4,000: the rest hold tabs, double spaces and such)


def test_plain_lines_is_is_plain_of_every_line() -> None:
    rng = random.Random(11)
    lines = split_lines("".join(_line(rng, messy=n % 2 == 1) for n in range(3000)))
    lines += split_lines("a `b  c` d\n`x`y\n- `q`\n `z`\n``\n")
    found = _collect_words(lines, None, word_texts)
    expected = [is_plain(line, word_texts) for line in lines]
    got = plain_lines(
        lines, found.distinct, found.word, found.length, found.starts, found.ends
    ).tolist()
    assert got == expected
    assert 0 < sum(expected) < len(expected)

"""prune's budget, cl100k's exact token count of the eligible blocks, mostly from the words.

Why: the tokenizer pass over the eligible blocks was ~40 % of `prune`'s time on text that
does not repeat (49 ms of ~130 per MB), while prune already knows what each word costs
with its leading space (`word_cost`). For most lines of prose the line's count follows
from those costs exactly, so only the other blocks go through the tokenizer.

Why it is exact. cl100k's pre-tokenizer cuts text into pieces and BPE encodes each piece
alone, so a text's count is the sum of its pieces' counts. Take a *plain* line: its words
rejoin its content with single spaces, and its prefix, if any, is a mark and one space
(`is_plain`); so it reads ``x0 x1 ... xn``, single spaces between parts that start and end
with a non-blank (a code span may hold blanks inside). No piece crosses such a space from
left to right: the word, number, contraction and punctuation pieces hold no blank but a
leading one, a whitespace piece inside a part ends before its next non-blank, and one
that starts at a single space followed by a non-blank is that space alone or starts a
word piece (``" x"``). The pre-tokenizer never looks behind, looks ahead only within
whitespace runs, and anchors ``$`` only after whitespace, so each part ``" xi"`` yields
the same pieces in the line as alone, and so does ``x0`` (before a space its last piece
ends as it ends at the end of a text). The last part may take the line ending with it
(``".\\n"`` is one piece), so its count is taken with the ending (`_ended`). Between
lines, an ending with a newline followed by a non-blank is a cut (checked by
`tests/compress/test_budget.py`); a plain line starts with a non-blank. So a block of
plain lines counts

    sum over lines of  tokens(x0) + cost(x1) + ... + cost(x(n-1)) + tokens(" " + xn + ending)

with ``tokens(x0 + ending)`` for a line of one word and no prefix. Lines with other
whitespace (tabs, double spaces, no-break spaces, indentation) or other line breaks are
not plain; their blocks are counted by the tokenizer (`tokens.estimate_tokens_sum`).
`tests/compress/test_budget.py` checks the sum against the tokenizer on lines made to
break it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import repeat
from operator import contains
from typing import TYPE_CHECKING

from tokenlens.compress.rewrite import Line
from tokenlens.tokens import estimate_tokens

if TYPE_CHECKING:
    import numpy as np

#: Line endings a plain line may have: one that ends in a newline, or none (the last line).
_ENDINGS = frozenset({"\n", "\r\n", ""})


@lru_cache(maxsize=65536)
def _tokens(text: str) -> int:
    """Tokens of a line's first part or last part with its ending; these repeat across
    lines (common words, a period and a newline), and the count depends on the text alone."""
    return estimate_tokens(text)


def _clean(text: str) -> bool:
    """Non-empty, no whitespace but single ASCII spaces, none at either end.

    (`isprintable` is False for every other character Python or the tokenizer calls
    whitespace, and for line breaks.)"""
    if not text or text[0] == " " or text[-1] == " ":
        return False
    return text.isprintable() and "  " not in text


def is_plain(line: Line, words: Callable[[str], list[str]]) -> bool:
    """May the line be counted from its words (see module docstring)?

    `words` splits a content into prune's words (on whitespace; a code span is one word).
    The words, which start and end with a non-blank, must rejoin the content with single
    spaces: then the content has no other whitespace between them, nor at its ends. (What
    a code span holds inside does not matter: no piece reads past its closing backtick.)"""
    content = line.content
    return bool(content) and _plain_around(line) and " ".join(words(content)) == content


def plain_lines(
    lines: Sequence[Line],
    distinct: list[str],
    word: np.ndarray,
    length: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
) -> np.ndarray:
    """`is_plain` of every line at once: the words of line k are i in ``starts[k]:ends[k]``,
    word i is ``distinct[word[i]]``, and `length[i]` its length.

    Why it is the same: the words of a content without a backtick are `str.split`'s, which
    hold no whitespace and are separated by some; they rejoin the content with single
    spaces exactly when the content is as long as the words with one character between
    each, and holds that many spaces. A content with a backtick is rejoined as `is_plain`
    does."""
    import numpy as np

    contents = [line.content for line in lines]
    count = ends - starts
    letters_before = np.concatenate(([0], np.cumsum(length)))
    size = np.fromiter(map(len, contents), np.intp, len(lines))
    spaces = np.fromiter(map(str.count, contents, repeat(" ")), np.intp, len(lines))
    rejoins = (size == letters_before[ends] - letters_before[starts] + count - 1) & (
        spaces == count - 1
    )
    around = np.fromiter(map(_plain_around, lines), bool, len(lines))
    plain = around & rejoins
    ticked = np.fromiter(map(contains, contents, repeat("`")), bool, len(lines))
    for k in np.flatnonzero(ticked).tolist():
        words = [distinct[i] for i in word[starts[k] : ends[k]].tolist()]
        plain[k] = around[k] and " ".join(words) == contents[k]
    return plain


def _plain_around(line: Line) -> bool:
    """The test of the line's prefix and ending (`is_plain`, `plain_lines`)."""
    prefix = line.prefix
    return line.ending in _ENDINGS and (not prefix or _plain_prefix(prefix))


@lru_cache(maxsize=1024)
def _plain_prefix(prefix: str) -> bool:
    """A mark and one space (prefixes are few)."""
    return prefix[-1] == " " and _clean(prefix[:-1])


def tokens_from_words(
    lines: Sequence[Line],
    plain: Sequence[bool] | np.ndarray,
    distinct: list[str],
    word: np.ndarray,
    cost: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
) -> int:
    """The exact token count of the lines marked `plain`, whose words are i in
    ``starts[k]:ends[k]``: word i is ``distinct[word[i]]`` and costs `cost[i]` with a
    leading space.

    Every word's cost, then per line the difference its first and last parts make; those
    depend on the word and the line ending alone, so each is computed once per distinct
    pair (lines are many, their first and last words and endings repeat)."""
    import numpy as np

    chosen = np.flatnonzero(np.asarray(plain, dtype=bool))
    if not len(chosen):
        return 0
    before = np.concatenate(([0], np.cumsum(cost)))  # the cost of the words before each
    first, last = starts[chosen], ends[chosen] - 1
    total = int((before[last + 1] - before[first]).sum())
    chosen_lines = [lines[k] for k in chosen.tolist()]
    prefixed = np.fromiter((bool(line.prefix) for line in chosen_lines), bool, len(chosen))
    ending = np.fromiter((_ENDING_CODE[line.ending] for line in chosen_lines), np.intp, len(chosen))
    # "- " + words: the prefix's mark is the first part, every word has a space.
    total += sum(_tokens(line.prefix[:-1]) for line in chosen_lines if line.prefix)
    single = ~prefixed & (last == first)  # one word, no prefix: the first part is the last
    spaced = last[~single]  # the last part is " " + word, with the ending
    total += _sum_once(
        word[spaced] * 3 + ending[~single],
        lambda key: _ended(" " + distinct[key // 3], _ENDING_OF[key % 3], None),
    ) - int(cost[spaced].sum())
    opening = first[~prefixed & ~single]  # the first part is the word without a space
    total += _sum_once(word[opening], lambda key: _tokens(distinct[key])) - int(cost[opening].sum())
    alone = first[single]
    total += _sum_once(
        word[alone] * 3 + ending[single],
        lambda key: _ended(distinct[key // 3], _ENDING_OF[key % 3], None),
    ) - int(cost[alone].sum())
    return total


#: The plain endings, numbered.
_ENDING_OF = ("\n", "\r\n", "")
_ENDING_CODE = {ending: code for code, ending in enumerate(_ENDING_OF)}


def _sum_once(keys: np.ndarray, value: Callable[[int], int]) -> int:
    """``sum(value(k) for k in keys)``, calling `value` once per distinct key."""
    import numpy as np

    distinct, count = np.unique(keys, return_counts=True)
    values = np.fromiter(map(value, distinct.tolist()), np.int64, len(distinct))
    return int((values * count).sum())


def _ended(part: str, ending: str, alone: int | None) -> int:
    """Tokens of `part` followed by the line `ending`, `alone` being those of `part` (None:
    not known). After an ASCII letter or digit the ending is a piece of its own (no piece
    that holds a letter or digit takes a newline), so the two counts add; after anything
    else it may join the last piece (``".\\n"``), so the two are encoded together."""
    last = part[-1]
    if last.isascii() and last.isalnum():
        return (_tokens(part) if alone is None else alone) + _tokens(ending)
    return _tokens(part + ending)

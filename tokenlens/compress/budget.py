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
    if not content or line.ending not in _ENDINGS:
        return False
    prefix = line.prefix
    if prefix and not (prefix[-1] == " " and _clean(prefix[:-1])):
        return False
    return " ".join(words(content)) == content


def tokens_from_words(
    lines: Sequence[Line],
    plain: Sequence[bool],
    texts: list[str],
    cost: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
) -> int:
    """The exact token count of the lines marked `plain`, each of whose words `texts[i]`
    for i in ``starts[k]:ends[k]`` costs `cost[i]` with a leading space."""
    import numpy as np

    chosen = np.flatnonzero(np.fromiter(plain, bool, len(plain)))
    if not len(chosen):
        return 0
    before = np.concatenate(([0], np.cumsum(cost)))  # the cost of the words before each
    total = int((before[ends[chosen]] - before[starts[chosen]]).sum())
    first, last = starts[chosen].tolist(), (ends[chosen] - 1).tolist()
    costs = cost.tolist()
    for k, a, z in zip(chosen.tolist(), first, last, strict=True):
        prefix, _, ending = lines[k]
        if prefix:  # "- " + words: the prefix's mark is the first part, every word has a space
            total += _tokens(prefix[:-1]) + _ended(" " + texts[z], ending, costs[z]) - costs[z]
        elif z > a:
            total += _tokens(texts[a]) - costs[a]
            total += _ended(" " + texts[z], ending, costs[z]) - costs[z]
        else:  # one word, no prefix: the first part is the last
            total += _ended(texts[a], ending, None) - costs[a]
    return total


def _ended(part: str, ending: str, alone: int | None) -> int:
    """Tokens of `part` followed by the line `ending`, `alone` being those of `part` (None:
    not known). After an ASCII letter or digit the ending is a piece of its own (no piece
    that holds a letter or digit takes a newline), so the two counts add; after anything
    else it may join the last piece (``".\\n"``), so the two are encoded together."""
    last = part[-1]
    if last.isascii() and last.isalnum():
        return (_tokens(part) if alone is None else alone) + _tokens(ending)
    return _tokens(part + ending)

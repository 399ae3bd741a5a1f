"""Rung 3, `prune` at keep-rate r: drop the least informative words of the prose, model-free.

Every word of every eligible block gets a score: its self-information in this text
(``log(total / count)``, so filler and repetition score low), near zero for stopwords,
and a bonus when it or its sentence shares terms with the question. Words are kept in
score order until the kept words cost ``r`` times the eligible blocks' tokens; numbers,
named entities and identifiers are always kept and paid for first. Because the ranking
does not depend on r, a smaller r keeps a subset of what a larger r keeps: the reduction
grows as r falls.

Line prefixes (indentation, list and quote markers) and line endings are never touched;
a line whose words all go is removed.

Speed: a word's facts are computed once per distinct word; scores, protection and the
greedy budget run on numpy arrays of the words (imported at the first call, so the proxy
starts without it). Ties keep text order, as the stable sort always did, sorted by each
score's rank among the few distinct scores. The budget, cl100k's exact count, comes from
the words' costs for blocks of plain lines (`budget`, which tests and counts the lines on
arrays too), from the tokenizer for the others. A line's kept words are a slice of all
the kept words joined once.
Within a call, a repeated block is tokenized for the budget and split into lines once,
and a repeated line split into words once (exact: the same text gives the same result).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, count
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from tokenlens.compress import lexicon
from tokenlens.compress.blocks import Block, segment
from tokenlens.compress.budget import plain_lines, tokens_from_words
from tokenlens.compress.rewrite import Line, rebuild, split_lines
from tokenlens.tokens import estimate_tokens, estimate_tokens_sum

if TYPE_CHECKING:
    import numpy as np

_SENTENCE_END = re.compile(r"[.!?:;]['\")\]]*$")
QUESTION_TERM_BONUS = 4.0
QUESTION_SENTENCE_BONUS = 1.5
T = TypeVar("T")


@lru_cache(maxsize=65536)
def word_cost(word: str) -> int:
    """Estimated tokens a word costs inside running text (with its leading space)."""
    return estimate_tokens(" " + word)


@lru_cache(maxsize=1024)
def _prefix_cost(prefix: str) -> int:
    """Tokens of a line prefix (indentation, list or quote marker): few distinct values."""
    return estimate_tokens(prefix)


class _Facts(NamedTuple):
    """What prune needs to know about one word; depends on the word alone, so cached."""

    bare: str  # without edge punctuation
    term: str  # bare, lowercased: the unit of counting
    stem: str  # term[:5], matched against the question's stems
    entity: bool  # capitalised non-stopword (whether it counts depends on its position)
    capitals: bool  # two or more capitals: an entity even at a sentence start
    always_kept: bool  # a number or an identifier
    scored: bool  # has a letter or digit
    stopword: bool
    ends_sentence: bool
    cost: int


@lru_cache(maxsize=65536)
def _facts(word: str) -> _Facts:
    bare = lexicon.core(word)
    term = bare.lower()
    return _Facts(
        bare=bare,
        term=term,
        stem=term[:5],
        entity=lexicon.is_entity(word),
        capitals=sum(c.isupper() for c in bare) >= 2,
        always_kept=lexicon.is_number(word) or lexicon.is_identifier(word),
        scored=bool(term) and any(c.isalnum() for c in term),
        stopword=lexicon.is_stopword(word),
        ends_sentence=bool(_SENTENCE_END.search(word)),
        cost=word_cost(word),
    )


def apply_prune(
    text: str, rate: float, question: str | None = None, *, blocks: list[Block] | None = None
) -> str:
    """Keep about `rate` of the eligible blocks' tokens (see module docstring).

    `blocks` is `segment(text)` when the caller has it already.
    """
    if blocks is None:
        blocks = segment(text)
    eligible = [i for i, b in enumerate(blocks) if b.eligible]
    if not eligible:
        return text
    import numpy as np  # here, not at import: the proxy starts without numpy

    split = _once_per_distinct(split_lines)
    words = _once_per_distinct(lexicon.word_texts)
    lines_of = {i: split(blocks[i].text) for i in eligible}
    lines = [line for lines in lines_of.values() for line in lines]
    found = _collect_words(lines, question, words)
    # The budget: blocks of plain lines are counted from their words (`budget`), the
    # others by the tokenizer. (`not_plain_before`: the lines not plain before each line.)
    sizes = np.fromiter((len(lines_of[i]) for i in eligible), np.intp, len(eligible))
    not_plain = ~plain_lines(
        lines, found.distinct, found.word, found.length, found.starts, found.ends
    )
    not_plain_before = np.concatenate(([0], np.cumsum(not_plain)))
    block_end = np.cumsum(sizes)
    by_words = not_plain_before[block_end] == not_plain_before[block_end - sizes]
    tokens = tokens_from_words(
        lines,
        np.repeat(by_words, sizes),
        found.distinct,
        found.word,
        found.cost,
        found.starts,
        found.ends,
    )
    tokens += estimate_tokens_sum(
        blocks[i].text for i, p in zip(eligible, by_words.tolist(), strict=True) if not p
    )
    spent = sum(map(_prefix_cost, found.prefixes))
    keep = found.protected.copy()
    spent += int(found.cost[keep].sum())
    # Best score first, ties in text order (`found.order`), then as many unprotected words
    # as fit: costs are positive, so the running total crosses the budget once and every
    # word before that point is kept.
    order = found.order
    candidates = order[~found.protected[order]]
    running = spent + np.cumsum(found.cost[candidates])
    budget = rate * tokens
    keep[candidates[: int(np.searchsorted(running, budget, side="right"))]] = True
    return rebuild(blocks, _rewrite(blocks, lines_of, found, keep))


def _once_per_distinct(fn: Callable[[str], T]) -> Callable[[str], T]:
    """`fn`, called once per distinct text: a text that repeats (a pasted paragraph, a
    quoted reply, a footer) gets the same result object again. For one call of
    `apply_prune`: the results are shared, never changed."""
    done: dict[str, T] = {}

    def once(text: str) -> T:
        if text in done:
            return done[text]
        result = done[text] = fn(text)
        return result

    return once


@dataclass
class _Words:
    """Every word of the eligible lines, in text order (one array row per word), and where
    each line's words start and end in them (lines in text order, counted over all the
    eligible blocks)."""

    distinct: list[str]  # the distinct words, in order of first occurrence
    word: np.ndarray  # per word: its index in `distinct`
    length: np.ndarray  # per word: its length
    cost: np.ndarray
    protected: np.ndarray
    order: np.ndarray  # word indices, best score first, ties in text order
    starts: np.ndarray  # per line: index of its first word
    ends: np.ndarray  # per line: index after its last word (== start: no words)
    prefixes: list[str]  # per line


def _collect_words(
    lines: list[Line], question: str | None, words: Callable[[str], list[str]]
) -> _Words:
    """`words` is `lexicon.word_texts`, or the same memoized."""
    import numpy as np

    found = list(map(words, [line.content for line in lines]))
    ends = np.cumsum(np.fromiter(map(len, found), np.intp, len(found)))
    starts = ends - np.fromiter(map(len, found), np.intp, len(found))
    size = int(ends[-1]) if len(ends) else 0  # words in all
    # The facts of each distinct word, once; then per word by its index (numpy gathers).
    # `first` maps a word to where it first occurs, in one pass of `setdefault`; its keys
    # are the distinct words in text order, its values their first positions.
    first: dict[str, int] = {}
    seen_at = np.fromiter(map(first.setdefault, chain.from_iterable(found), count()), np.intp, size)
    distinct = list(first)
    rank = np.empty(size, dtype=np.intp)
    rank[np.fromiter(first.values(), np.intp, len(first))] = np.arange(len(first))
    word_id = rank[seen_at]
    facts = [_facts(word) for word in distinct]
    terms = list(dict.fromkeys(f.term for f in facts))
    term_index = {t: i for i, t in enumerate(terms)}
    term_of = np.fromiter((term_index[f.term] for f in facts), np.intp, len(facts))
    term_w = term_of[word_id]

    def column(values: Iterable[bool | int]) -> np.ndarray:
        return np.fromiter(values, np.int64, len(facts))[word_id]

    ends_sentence = column(f.ends_sentence for f in facts).astype(bool)
    entity = column(f.entity for f in facts).astype(bool)
    initial = np.empty(size, dtype=bool)
    initial[1:] = ends_sentence[:-1]
    initial[starts[ends > starts]] = True  # a line (with words) starts a sentence

    counts = np.bincount(term_w, minlength=len(terms))
    total = max(size, 1)
    bare_index = {bare: i for i, bare in enumerate(dict.fromkeys(f.bare for f in facts))}
    bare_w = np.fromiter((bare_index[f.bare] for f in facts), np.intp, len(facts))[word_id]
    midsentence_caps = np.zeros(len(bare_index), dtype=bool)
    midsentence_caps[bare_w[~initial & entity]] = True
    q_terms = set(lexicon.content_terms(question or ""))
    q_stems = {term[:5] for term in q_terms}
    # A word's score is its term's score plus its sentence's bonus; terms repeat a lot.
    term_facts = {f.term: f for f in reversed(facts)}  # any word of a term: same facts
    term_score = np.empty(len(terms), dtype=np.float64)
    for i, term in enumerate(terms):
        f = term_facts[term]
        if not f.scored:
            score = 0.0
        elif f.stopword:
            score = 0.05 * math.log(total / int(counts[i]) + 1.0)
        else:
            score = 1.0 + math.log(total / int(counts[i]))
        if term and (term in q_terms or f.stem in q_stems):
            score += QUESTION_TERM_BONUS
        term_score[i] = score
    stem_of = {stem: i for i, stem in enumerate(sorted(q_stems))}
    stem_w = column(stem_of.get(f.stem, -1) for f in facts)
    hits_w, hit_bonus = _sentence_hits(initial, stem_w, len(q_stems))
    order = _best_first(term_score, term_w, hit_bonus, hits_w)
    protected = column(f.always_kept for f in facts).astype(bool) | (
        entity
        & (~initial | column(f.capitals for f in facts).astype(bool) | midsentence_caps[bare_w])
    )
    prefixes = [line.prefix for line in lines]
    length = np.fromiter(map(len, distinct), np.intp, len(distinct))[word_id]
    cost = column(f.cost for f in facts)
    return _Words(distinct, word_id, length, cost, protected, order, starts, ends, prefixes)


def _sentence_hits(
    initial: np.ndarray, stem: np.ndarray, q_stems: int
) -> tuple[np.ndarray, np.ndarray]:
    """Words of a sentence that mentions the question's terms are worth a bit more: the
    share of the question's stems the sentence mentions (`stem`: a word's question stem
    index, -1 for none), times `QUESTION_SENTENCE_BONUS`. Returned as each word's number
    of hits and the bonus for each number of hits (so the scores' few distinct values are
    known without looking at every word)."""
    import numpy as np

    if not q_stems or not len(initial):
        return np.zeros(len(initial), dtype=np.intp), np.zeros(1, dtype=np.float64)
    sentence = np.cumsum(initial) - 1
    hit = stem >= 0
    pairs = np.unique(sentence[hit] * q_stems + stem[hit])  # (sentence, stem), once each
    hits = np.bincount(pairs // q_stems, minlength=int(sentence[-1]) + 1)
    levels = np.arange(int(hits.max()) + 1)
    bonus = QUESTION_SENTENCE_BONUS * levels / q_stems
    return hits[sentence], np.where(levels > 0, bonus, 0.0)


def _best_first(
    term_score: np.ndarray, term: np.ndarray, hit_bonus: np.ndarray, hits: np.ndarray
) -> np.ndarray:
    """``np.argsort(-score, kind="stable")`` for a word's score ``term_score[term] +
    hit_bonus[hits]`` (the same floats), sorted faster: the scores take few distinct values
    (tens on a megabyte), so each word gets its score's rank among them, and numpy sorts
    16-bit keys stably by radix, in linear time, where a stable sort of floats merges."""
    import numpy as np

    if len(term_score) * len(hit_bonus) <= len(term):  # every (term, hits) score
        table = (term_score[:, None] + hit_bonus[None, :]).ravel()
        word = term * len(hit_bonus) + hits
    else:  # (a long question on a short text: rank the words' own scores)
        table, word = term_score[term] + hit_bonus[hits], np.arange(len(term))
    distinct, rank = np.unique(-table, return_inverse=True)  # equal floats share a rank
    keys = rank.ravel()[word]
    if len(distinct) <= 1 << 16:
        keys = keys.astype(np.uint16)
    return np.argsort(keys, kind="stable")


def _rewrite(
    blocks: list[Block], lines_of: dict[int, list[Line]], found: _Words, keep: np.ndarray
) -> dict[int, str]:
    import numpy as np

    # The kept words in text order joined by spaces, once; each line's kept words are a
    # slice of that text, from its first kept word's start to its last one's end.
    distinct = np.empty(len(found.distinct), dtype=object)
    distinct[:] = found.distinct
    joined = " ".join(distinct[found.word[keep]].tolist())
    at = np.concatenate(([0], np.cumsum(found.length[keep] + 1)))  # where each kept word starts
    kept_before = np.concatenate(([0], np.cumsum(keep)))
    firsts, lasts = kept_before[found.starts], kept_before[found.ends]
    cut_from, cut_to = at[firsts].tolist(), (at[lasts] - 1).tolist()
    any_kept = (lasts > firsts).tolist()
    had_words = (found.ends > found.starts).tolist()
    replaced: dict[int, str] = {}
    n = 0  # the line's index over all eligible lines
    for b, lines in lines_of.items():
        out: list[str] = []
        for line in lines:
            if not had_words[n]:  # no words: the line stays as it was
                out += line  # (its prefix, content and ending)
            elif any_kept[n]:
                out += (line.prefix, joined[cut_from[n] : cut_to[n]], line.ending)
            n += 1
        text = "".join(out)
        if text and not text.endswith(("\n", "\r")) and blocks[b].text.endswith("\n"):
            text += "\n"
        replaced[b] = text
    return replaced

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
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from tokenlens.compress import lexicon
from tokenlens.compress.blocks import Block, segment
from tokenlens.compress.rewrite import Line, rebuild, split_lines
from tokenlens.tokens import estimate_tokens

_SENTENCE_END = re.compile(r"[.!?:;]['\")\]]*$")
QUESTION_TERM_BONUS = 4.0
QUESTION_SENTENCE_BONUS = 1.5


@dataclass
class _Words:
    """Every word of the eligible lines, in text order, as columns (one row per word)."""

    block: list[int]
    line: list[int]
    text: list[str]
    cost: list[int]
    protected: list[bool]
    score: list[float]


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
    lines_of = {i: split_lines(b.text) for i, b in enumerate(blocks) if b.eligible}
    if not lines_of:
        return text
    found = _collect_words(lines_of, question)
    budget = rate * sum(estimate_tokens(blocks[i].text) for i in lines_of)
    spent = sum(_prefix_cost(line.prefix) for lines in lines_of.values() for line in lines)
    cost = found.cost
    protected = found.protected
    keep: set[int] = {order for order, kept in enumerate(protected) if kept}
    spent += sum(cost[order] for order in keep)
    # best score first, ties in text order (the sort is stable, also when reversed)
    for order in sorted(range(len(found.score)), key=found.score.__getitem__, reverse=True):
        if protected[order]:
            continue
        if spent + cost[order] > budget:
            break
        keep.add(order)
        spent += cost[order]
    return rebuild(blocks, _rewrite(blocks, lines_of, found, keep))


def _collect_words(lines_of: dict[int, list[Line]], question: str | None) -> _Words:
    block_ids: list[int] = []
    line_ids: list[int] = []
    texts: list[str] = []
    facts: list[_Facts] = []
    initials: list[bool] = []  # sentence-initial
    for b, lines in lines_of.items():
        for n, line in enumerate(lines):
            found = lexicon.word_texts(line.content)
            if not found:
                continue
            mine = [_facts(word) for word in found]
            texts += found
            facts += mine
            block_ids += [b] * len(found)
            line_ids += [n] * len(found)
            initials.append(True)
            initials += [f.ends_sentence for f in mine[:-1]]
    counts = Counter(f.term for f in facts)
    total = max(sum(counts.values()), 1)
    midsentence_caps = {
        f.bare for f, initial in zip(facts, initials, strict=True) if not initial and f.entity
    }
    q_terms = set(lexicon.content_terms(question or ""))
    q_stems = {term[:5] for term in q_terms}
    # A word's score is its term's score plus its sentence's bonus; terms repeat a lot.
    term_score: dict[str, float] = {}
    for f in facts:
        if f.term in term_score:
            continue
        if not f.scored:
            score = 0.0
        elif f.stopword:
            score = 0.05 * math.log(total / counts[f.term] + 1.0)
        else:
            score = 1.0 + math.log(total / counts[f.term])
        if f.term and (f.term in q_terms or f.stem in q_stems):
            score += QUESTION_TERM_BONUS
        term_score[f.term] = score
    bonus = _sentence_bonuses(facts, initials, q_stems)
    scores = [term_score[f.term] + extra for f, extra in zip(facts, bonus, strict=True)]
    protected = [
        f.always_kept or (f.entity and (not initial or f.capitals or f.bare in midsentence_caps))
        for f, initial in zip(facts, initials, strict=True)
    ]
    return _Words(block_ids, line_ids, texts, [f.cost for f in facts], protected, scores)


def _sentence_bonuses(facts: list[_Facts], initials: list[bool], q_stems: set[str]) -> list[float]:
    """Words of a sentence that mentions the question's terms are worth a bit more."""
    bonuses = [0.0] * len(facts)
    if not q_stems:
        return bonuses
    start = 0
    for i in range(len(facts) + 1):
        if i == len(facts) or (i > start and initials[i]):
            hits = {f.stem for f in facts[start:i]} & q_stems
            if hits:
                for j in range(start, i):
                    bonuses[j] = QUESTION_SENTENCE_BONUS * len(hits) / len(q_stems)
            start = i
    return bonuses


def _rewrite(
    blocks: list[Block], lines_of: dict[int, list[Line]], found: _Words, keep: set[int]
) -> dict[int, str]:
    kept_words: dict[tuple[int, int], list[str]] = {}
    had_words = set(zip(found.block, found.line, strict=True))
    for order in sorted(keep):
        kept_words.setdefault((found.block[order], found.line[order]), []).append(found.text[order])
    replaced: dict[int, str] = {}
    for b, lines in lines_of.items():
        out: list[str] = []
        for n, line in enumerate(lines):
            kept = kept_words.get((b, n))
            if kept:
                out.append(line.prefix + " ".join(kept) + line.ending)
            elif (b, n) not in had_words:
                out.append(line.prefix + line.content + line.ending)
        text = "".join(out)
        if text and not text.endswith(("\n", "\r")) and blocks[b].text.endswith("\n"):
            text += "\n"
        replaced[b] = text
    return replaced

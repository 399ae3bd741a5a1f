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

from tokenlens.compress import lexicon
from tokenlens.compress.blocks import Block, segment
from tokenlens.compress.rewrite import Line, rebuild, split_lines
from tokenlens.tokens import estimate_tokens

_SENTENCE_END = re.compile(r"[.!?:;]['\")\]]*$")
QUESTION_TERM_BONUS = 4.0
QUESTION_SENTENCE_BONUS = 1.5


@dataclass(frozen=True)
class _Word:
    block: int
    line: int
    order: int
    text: str
    cost: int
    protected: bool
    score: float


@lru_cache(maxsize=65536)
def word_cost(word: str) -> int:
    """Estimated tokens a word costs inside running text (with its leading space)."""
    return estimate_tokens(" " + word)


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
    found = _collect_words(blocks, lines_of, question)
    budget = rate * sum(estimate_tokens(blocks[i].text) for i in lines_of)
    spent = sum(estimate_tokens(line.prefix) for lines in lines_of.values() for line in lines)
    keep: set[int] = set()
    for word in found:
        if word.protected:
            keep.add(word.order)
            spent += word.cost
    for word in sorted(found, key=lambda w: (-w.score, w.order)):
        if word.protected:
            continue
        if spent + word.cost > budget:
            break
        keep.add(word.order)
        spent += word.cost
    return rebuild(blocks, _rewrite(blocks, lines_of, found, keep))


def _collect_words(
    blocks: list[Block], lines_of: dict[int, list[Line]], question: str | None
) -> list[_Word]:
    raw: list[tuple[int, int, str, bool]] = []  # block, line, word, sentence-initial
    for b, lines in lines_of.items():
        for n, line in enumerate(lines):
            initial = True
            for match in lexicon.words(line.content):
                raw.append((b, n, match.group(0), initial))
                initial = bool(_SENTENCE_END.search(match.group(0)))
    counts = Counter(lexicon.core(w).lower() for _, _, w, _ in raw)
    total = max(sum(counts.values()), 1)
    midsentence_caps = {
        lexicon.core(w) for _, _, w, initial in raw if not initial and lexicon.is_entity(w)
    }
    q_terms = set(lexicon.content_terms(question or ""))
    q_stems = {term[:5] for term in q_terms}
    sentence_bonus = _sentence_bonuses(raw, q_stems)
    words: list[_Word] = []
    for order, (b, n, w, initial) in enumerate(raw):
        bare = lexicon.core(w)
        entity = lexicon.is_entity(w) and (
            not initial or bare in midsentence_caps or sum(c.isupper() for c in bare) >= 2
        )
        protected = lexicon.is_number(w) or lexicon.is_identifier(w) or entity
        term = bare.lower()
        if not term or not any(c.isalnum() for c in term):
            score = 0.0
        elif lexicon.is_stopword(w):
            score = 0.05 * math.log(total / counts[term] + 1.0)
        else:
            score = 1.0 + math.log(total / counts[term])
        if term and (term in q_terms or term[:5] in q_stems):
            score += QUESTION_TERM_BONUS
        score += sentence_bonus[order]
        words.append(_Word(b, n, order, w, word_cost(w), protected, score))
    return words


def _sentence_bonuses(raw: list[tuple[int, int, str, bool]], q_stems: set[str]) -> list[float]:
    """Words of a sentence that mentions the question's terms are worth a bit more."""
    bonuses = [0.0] * len(raw)
    if not q_stems:
        return bonuses
    start = 0
    for i in range(len(raw) + 1):
        if i == len(raw) or (i > start and raw[i][3]):
            sentence = raw[start:i]
            hits = {lexicon.core(w).lower()[:5] for _, _, w, _ in sentence} & q_stems
            if hits:
                for j in range(start, i):
                    bonuses[j] = QUESTION_SENTENCE_BONUS * len(hits) / len(q_stems)
            start = i
    return bonuses


def _rewrite(
    blocks: list[Block], lines_of: dict[int, list[Line]], found: list[_Word], keep: set[int]
) -> dict[int, str]:
    kept_words: dict[tuple[int, int], list[str]] = {}
    had_words: set[tuple[int, int]] = set()
    for word in found:
        had_words.add((word.block, word.line))
        if word.order in keep:
            kept_words.setdefault((word.block, word.line), []).append(word.text)
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

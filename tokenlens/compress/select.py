"""Rung 4, `select` at keep-rate r: keep the most relevant sentences of the prose, in order.

Units are sentences of prose paragraphs and items (lines) of lists and quotes. Each is
scored with BM25 (k1=1.2, b=0.75) against the question's terms; without a question,
against the text's twenty most frequent content terms (its centre of gravity). Ranking,
best first: units that share terms with the question, then units carrying numbers or
named entities, then by BM25; ties go to the earlier unit. Units are taken in that order
while at least half of each fits in what is left of ``r`` times the eligible blocks'
tokens (whole sentences cannot hit a budget exactly; this rounds to the nearest one
instead of always down), and the survivors are written back in document order. Nothing
inside a kept sentence is changed. The reduction reported is measured, not ``1 - r``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from tokenlens.compress import lexicon
from tokenlens.compress.blocks import Block, segment
from tokenlens.compress.rewrite import ending_of, rebuild
from tokenlens.tokens import estimate_tokens

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])['\")\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
K1 = 1.2
B = 0.75
FALLBACK_QUERY_TERMS = 20


@dataclass(frozen=True)
class _Unit:
    block: int
    order: int
    text: str
    cost: int
    terms: tuple[str, ...]
    informative: bool


def sentences(paragraph: str) -> list[str]:
    """Split a prose paragraph into sentences (line breaks inside it count as spaces)."""
    flat = " ".join(part.strip() for part in paragraph.splitlines() if part.strip())
    return [s for s in _SENTENCE_SPLIT.split(flat) if s.strip()]


def apply_select(
    text: str, rate: float, question: str | None = None, *, blocks: list[Block] | None = None
) -> str:
    """Keep about `rate` of the eligible blocks' tokens, best sentences first.

    `blocks` is `segment(text)` when the caller has it already.
    """
    if blocks is None:
        blocks = segment(text)
    eligible = [i for i, block in enumerate(blocks) if block.eligible]
    if not eligible:
        return text
    kinds = {i: blocks[i].kind for i in eligible}
    units = _units([(i, blocks[i].text, kinds[i]) for i in eligible])
    budget = rate * sum(estimate_tokens(blocks[i].text) for i in eligible)
    q_terms = lexicon.content_terms(question or "")
    query = _query(units, q_terms)
    scores = _bm25(units, query)
    q_set = set(q_terms)
    ranked = sorted(
        units,
        key=lambda u: (
            -int(bool(q_set & set(u.terms))),
            -int(u.informative),
            -scores[u.order],
            u.order,
        ),
    )
    keep: set[int] = set()
    spent = 0
    for unit in ranked:
        if spent + unit.cost / 2 <= budget:  # nearest whole sentence, not always under
            keep.add(unit.order)
            spent += unit.cost
    kept_units: dict[int, list[_Unit]] = {block_id: [] for block_id in eligible}
    for unit in units:
        if unit.order in keep:
            kept_units[unit.block].append(unit)
    replaced: dict[int, str] = {}
    for block_id in eligible:
        mine = kept_units[block_id]
        original = blocks[block_id].text
        if kinds[block_id] == "prose":
            body = " ".join(u.text for u in mine)
            replaced[block_id] = body + ending_of(original) if body else ""
        else:
            replaced[block_id] = "".join(u.text for u in mine)
    return rebuild(blocks, replaced)


def _units(eligible: list[tuple[int, str, str]]) -> list[_Unit]:
    """Sentences of prose blocks; whole lines (items) of list and quote blocks."""
    units: list[_Unit] = []
    for block_id, text, kind in eligible:
        pieces = sentences(text) if kind == "prose" else text.splitlines(keepends=True)
        for piece in pieces:
            found = lexicon.word_texts(piece)
            units.append(
                _Unit(
                    block=block_id,
                    order=len(units),
                    text=piece,
                    cost=estimate_tokens(piece),
                    terms=tuple(lexicon.content_terms(piece)),
                    informative=any(map(_number_or_entity, found[1:]))
                    or any(lexicon.is_number(w) for w in found[:1]),
                )
            )
    return units


@lru_cache(maxsize=65536)
def _number_or_entity(word: str) -> bool:
    """A word that makes its sentence informative (past the first word); cached per word."""
    return lexicon.is_number(word) or lexicon.is_entity(word)


def _query(units: list[_Unit], q_terms: list[str]) -> list[str]:
    if q_terms:
        return sorted(set(q_terms))
    counts = Counter(term for unit in units for term in unit.terms)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [term for term, _ in ranked[:FALLBACK_QUERY_TERMS]]


def _bm25(units: list[_Unit], query: list[str]) -> list[float]:
    n = len(units)
    avg = sum(len(u.terms) for u in units) / max(n, 1) or 1.0
    df = Counter(term for u in units for term in set(u.terms))
    wanted = set(query)
    scores: list[float] = []
    for unit in units:
        if wanted.isdisjoint(unit.terms):  # no query term: the loop below would add nothing
            scores.append(0.0)
            continue
        tf = Counter(unit.terms)
        score = 0.0
        for term in query:
            if not tf[term]:
                continue
            idf = math.log(1.0 + (n - df[term] + 0.5) / (df[term] + 0.5))
            norm = tf[term] + K1 * (1 - B + B * len(unit.terms) / avg)
            score += idf * tf[term] * (K1 + 1) / norm
        scores.append(score)
    return scores

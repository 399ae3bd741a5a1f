"""Reference-metric grading: an answer scored against the reference, with no model at all.

Why it exists: offline there is no judge worth the name (a 135M model grades at random),
and online it is a cross-check on the LLM judge (how often the two agree). It must be
deterministic, cheap, and on the judge's 0-100 scale.

How it grades (documented so a reader can predict a score):

* Text is lower-cased, split into words and numbers; a short stop-word list is dropped and
  a plural "s" is stripped, so "The invoices" and "invoice" match.
* Numbers are compared by value ("1,200" == "1200" == "1200.0"); a reference number must
  appear in the answer exactly (exact match for numbers, no partial credit for 41 vs 42).
* Words are scored by recall-weighted F-measure (F2) of the reference's content words:
  key-fact recall matters most, but padding an answer with everything in sight costs a bit.
* When the reference is essentially a number (at most two other content words), the score
  is the share of reference numbers the answer contains. When it mixes numbers and words,
  numbers weigh 60% and words 40%. Otherwise the word score alone.
* An answer identical to the reference after normalisation scores 100; an empty answer 0.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["content_terms", "score"]

_STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with from as is are was were be been being
    it its this that these those there here which who whom whose what when where why how do
    does did done has have had having i you he she we they them his her their our your my me
    us not no so than then too very can could should would will shall may might must also
    just only about into over under again further once all any both each few more most other
    some such own same s t don""".split()  # noqa: SIM905
)

_TOKEN = re.compile(r"-?\d[\d,]*(?:\.\d+)?%?|[a-z][a-z0-9'_-]*", re.IGNORECASE)
_NUMBER = re.compile(r"^-?\d[\d,]*(?:\.\d+)?%?$")

#: Recall weight of the word F-measure (beta=2: recall counts four times precision).
_BETA = 2.0
_NUMBER_WEIGHT = 0.6
#: A reference with a number and at most this many other content words is "a number".
_NUMERIC_REFERENCE_MAX_WORDS = 2


def _normalise_number(token: str) -> str:
    """Canonical text of a number token, so equal values compare equal."""
    raw = token.rstrip("%").replace(",", "")
    try:
        value = float(raw)
    except ValueError:
        return token
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return ("-0" if text == "-0" else text) + ("%" if token.endswith("%") else "")


def _stem(word: str) -> str:
    word = word.strip("'_-")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _tokens(text: str) -> tuple[list[str], list[str]]:
    """(content words, numbers) of a text, normalised."""
    words: list[str] = []
    numbers: list[str] = []
    for raw in _TOKEN.findall(text.lower()):
        if _NUMBER.match(raw):
            numbers.append(_normalise_number(raw))
            continue
        word = _stem(raw)
        if word and word not in _STOPWORDS:
            words.append(word)
    return words, numbers


def content_terms(text: str) -> set[str]:
    """The normalised content words and numbers of a text (what `score` compares)."""
    words, numbers = _tokens(text)
    return set(words) | set(numbers)


def _word_score(answer: list[str], reference: list[str]) -> float:
    if not reference:
        return 1.0
    if not answer:
        return 0.0
    overlap = sum((Counter(answer) & Counter(reference)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(answer)
    recall = overlap / len(reference)
    beta2 = _BETA * _BETA
    return (1 + beta2) * precision * recall / (beta2 * precision + recall)


def _number_recall(answer: list[str], reference: list[str]) -> float:
    present = set(answer)
    return sum(1 for number in set(reference) if number in present) / len(set(reference))


def score(answer: str, reference: str) -> float:
    """Grade `answer` against `reference` on 0..100 (deterministic; see module docstring)."""
    answer_words, answer_numbers = _tokens(answer)
    ref_words, ref_numbers = _tokens(reference)
    if not answer.strip() or not (answer_words or answer_numbers):
        return 0.0
    if (answer_words, sorted(answer_numbers)) == (ref_words, sorted(ref_numbers)):
        return 100.0
    if not ref_words and not ref_numbers:
        # A reference with no content words at all: only an exact normalised match counts.
        return 100.0 if answer.strip().lower() == reference.strip().lower() else 0.0
    if not ref_numbers:
        value = _word_score(answer_words, ref_words)
    elif len(ref_words) <= _NUMERIC_REFERENCE_MAX_WORDS:
        value = _number_recall(answer_numbers, ref_numbers)
    else:
        value = _NUMBER_WEIGHT * _number_recall(answer_numbers, ref_numbers) + (
            1 - _NUMBER_WEIGHT
        ) * _word_score(answer_words, ref_words)
    return round(100.0 * value, 2)

"""Word-level facts the model-free rungs share: stopwords, terms, and what must never go.

`prune` and `select` decide what is low-information with plain statistics, so both need
the same notion of a *term* (for scoring) and of a *protected* word (never dropped or
edited): numbers, named entities and identifiers. Keeping those is what lets a pruned
context still answer "how much", "who" and "which function".
"""

from __future__ import annotations

import re

_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    either else even ever every few for from further had has have having he her here hers
    herself him himself his how however i if in into is it its itself just least less let
    like many may me might more most much must my myself neither no nor not now of off often
    on once only or other others otherwise our ours ourselves out over own per perhaps quite
    rather really same shall she should since so some such than that the their theirs them
    themselves then there therefore these they this those though through thus to too under
    until up upon us very via was we were what whatever when whenever where whereas wherever
    whether which while who whoever whom whose why will with within without would yet you
    your yours yourself yourselves basically actually simply just quite really indeed
    generally usually typically probably certainly obviously clearly essentially etc
"""
#: Function words of English: the first to go when a budget is tight.
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"`[^`\n]*`|\S+")
_TERM = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_DIGIT = re.compile(r"\d")
_IDENTIFIER = re.compile(
    r"`|[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]|[A-Za-z0-9]\.[A-Za-z_]|::|->|\(\)|[/\\]\w|\w@\w|"
    r"^[#$@]\w|=\w|\w\[|https?:"
)
_EDGE_PUNCT = "\"'“”‘’()[]{}<>,.;:!?*"


def words(text: str) -> list[re.Match[str]]:
    """Whitespace-separated words, with `inline code spans` kept as one word."""
    return list(_WORD.finditer(text))


def word_texts(text: str) -> list[str]:
    """The texts of `words(text)`, without building match objects.

    Without a backtick that is `str.split()`: `\\S` and `split` agree on what whitespace
    is (both ask `Py_UNICODE_ISSPACE`), and `split` is several times faster than a scan."""
    return text.split() if "`" not in text else _WORD.findall(text)


def terms(text: str) -> list[str]:
    """Lowercased alphanumeric terms, for scoring and for matching the question."""
    return [term.lower() for term in _TERM.findall(text)]


def core(word: str) -> str:
    """A word without surrounding punctuation (``"Paris,"`` -> ``Paris``)."""
    return word.strip(_EDGE_PUNCT)


def is_number(word: str) -> bool:
    return bool(_DIGIT.search(word))


def is_identifier(word: str) -> bool:
    """snake_case, camelCase, dotted.names, paths, URLs, `code`, flags and the like."""
    return bool(_IDENTIFIER.search(core(word) or word))


def is_entity(word: str) -> bool:
    """A capitalised non-stopword or an acronym: the cheap stand-in for a named entity."""
    bare = core(word)
    if not bare or not bare[0].isupper():
        return False
    return bare.lower() not in STOPWORDS


def is_protected(word: str) -> bool:
    """Numbers, named entities and identifiers: never dropped, never edited."""
    return is_number(word) or is_identifier(word) or is_entity(word)


def is_stopword(word: str) -> bool:
    bare = core(word).lower()
    return bool(bare) and bare in STOPWORDS


def content_terms(text: str) -> list[str]:
    """Terms minus stopwords: what a question is about."""
    return [term for term in map(str.lower, _TERM.findall(text)) if term not in STOPWORDS]

"""A request body as a set of hashed features: the one input the learned classifier sees.

Why hashed binary features and no vocabulary: the feature function is the contract between
fitting (scikit-learn, at calibration time) and inference (plain numpy, in the proxy). A
hash needs no vocabulary to ship, and `zlib.crc32` is stable across processes and Python
versions (the built-in `hash` is salted per process). Each feature is a short string
("q:how", "turns:2-3", "rule:extraction") hashed into `2**HASH_BITS` slots; a request is
the *set* of its slots, weighted 1 and scaled to unit length, as scikit-learn's
`HashingVectorizer(binary=True, norm="l2")` would.

What is read, bounded so a 10 MB prompt costs the same as a 10 KB one:
* the question (the text the compressor never touches): its words, its first two words
  ("how many"), its length and punctuation, and how often each cue family of the
  hand-written rules occurs in it ("summarize", "how much", "exactly", "json", ...).
  Word pairs were tried and left out: cross-validated, they made wrong labels come at
  higher confidence;
* the system prompt's words (first `SYSTEM_CHARS`);
* the shape of the conversation: how many earlier turns;
* the shape of the context (first `CONTEXT_SCAN_CHARS` plus its total length): code fences,
  code lines, JSON, e-mail headers, speaker lines, tables, headings, numbers and money;
* what the hand-written rules say (`tokenlens.classifier.rules`), as one more feature.

The body must be built the way the proxy receives it; for calibration tasks that is
`CalibrationTask.to_request`, the same body the calibration compresses and the proxy sees.
"""

from __future__ import annotations

import functools
import math
import re
import zlib
from collections.abc import Mapping
from typing import Any

from tokenlens.classifier.rules import decide, read_evidence

#: Slots of the hash space. 2**14 keeps the in-memory weight table small (7 classes:
#: under 1 MB) while collisions among the few thousand features a task file yields are rare.
HASH_BITS = 14
N_FEATURES = 1 << HASH_BITS
#: Version of the feature function; a bundle fitted with another version is refused.
FEATURES_VERSION = 1
QUESTION_CHARS = 2_000
SYSTEM_CHARS = 1_000
CONTEXT_SCAN_CHARS = 3_000

_WORD = re.compile(r"[a-z]+")
#: One pass over the context's lines: each alternative names the shape it counts. The
#: leading newline (not `^` with MULTILINE) lets the regex engine jump from line to line.
_LINE_SHAPES = re.compile(
    r"\n(?:(?P<fence>[ \t]*```)"
    r"|(?P<code>[ \t]*(?:def |class |import |from \S+ import|return\b|function\b|const |let "
    r"|var |public |private |#include|package |func |fn |SELECT\b|CREATE TABLE|if \(|for \(|\}))"
    r"|(?P<email>(?:From|To|Subject|Date|Cc):)"
    r"|(?P<heading>#{1,6} |\d+(?:\.\d+)*\.? [A-Z])"
    r"|(?P<table>[ \t]*\|)"
    r"|(?P<bullet>[ \t]*[-*•] )"
    r"|(?P<yaml>[ \t]*[a-z_][a-z0-9_]*: )"
    r"|(?P<stamp>\[)"
    r"|(?P<speaker>[A-Z][a-z]+(?: [A-Z][a-z]+)?: ))"
)
_SHAPES = ("fence", "code", "email", "heading", "table", "bullet", "yaml", "stamp", "speaker")
_JSON = re.compile(r"\{\s*\"[^\"]+\"\s*:")
_DIGITS = b"0123456789"


def _bucket(count: int) -> str:
    """0, 1, 2-3, 4-7, 8-15, ...: counts as coarse powers of two."""
    if count <= 1:
        return str(count)
    low = 1 << (count.bit_length() - 1)
    return f"{low}-{2 * low - 1}"


def feature_names(body: Mapping[str, Any]) -> set[str]:
    """The named features of one Messages API body (before hashing)."""
    found = read_evidence(body)
    question, context = found.question[:QUESTION_CHARS], found.context
    names: set[str] = {f"turns:{_bucket(found.turns)}", f"rule:{decide(found)}"}

    words = _WORD.findall(question.lower())
    names.update(f"q:{w}" for w in words)
    if words:
        names.add(f"q0:{words[0]}")
        names.add(f"q01:{'_'.join(words[:2])}")
    names.add(f"qlen:{_bucket(len(words))}")
    names.add(f"q?:{_bucket(question.count('?'))}")
    if question.rstrip().endswith("?"):
        names.add("q:ends?")
    if ":" in question:
        names.add("q:colon")
    names.update(f"cue:{name}:{_bucket(n)}" for name, n in found.cues.items())

    if found.system:
        names.add("sys:yes")
        text = found.system[:SYSTEM_CHARS].lower()
        names.update(f"s:{w}" for w in _WORD.findall(text))

    names.add(f"clen:{_bucket(len(context) // 256)}")
    scan = context[:CONTEXT_SCAN_CHARS]
    shape = dict.fromkeys(_SHAPES, 0)
    for match in _LINE_SHAPES.finditer("\n" + scan):
        shape[match.lastgroup or ""] += 1
    shape["json"] = len(_JSON.findall(scan))
    shape["money"] = sum(scan.count(sign) for sign in "$€£¥%")
    shape["lines"] = scan.count("\n") // 8
    raw = scan.encode("utf-8", "replace")
    shape["digits%"] = (len(raw) - len(raw.translate(None, _DIGITS))) * 100 // max(len(raw), 1)
    names.update(f"c:{key}:{_bucket(count)}" for key, count in shape.items())
    return names


@functools.lru_cache(maxsize=1 << 16)
def slot(name: str) -> int:
    """The hash slot of one feature name (stable across processes; names repeat a lot
    across requests, so they are cached)."""
    return zlib.crc32(name.encode("utf-8")) & (N_FEATURES - 1)


def hashed(body: Mapping[str, Any]) -> tuple[list[int], float]:
    """(sorted distinct slots, the weight of each) of one body: a unit-length binary vector."""
    slots = sorted({slot(name) for name in feature_names(body)})
    return slots, 1.0 / math.sqrt(len(slots)) if slots else 0.0

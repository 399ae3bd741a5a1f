"""Near-duplicate detection for harvested tasks: same template, different ids.

Live traffic repeats itself: the same prompt template filled with another order number,
customer name or date. A calibration set made of forty copies of one template measures
one task forty times and reports it as forty, so its intervals lie. Two stages:

1. **Template normalisation**: lower-case, and every number, hex id, UUID and redaction
   marker becomes one placeholder; whitespace runs collapse. Texts that differ only in
   such slots become byte-equal.
2. **MinHash over word 3-shingles of the normalised text** (64 permutations, banded LSH,
   16 bands of 4 rows; a candidate pair counts when its estimated Jaccard similarity is
   at least `threshold`, 0.8 by default). This catches what stage 1 misses: a template
   whose filled-in names or a sentence of free text differ. Jaccard on shingles is the
   standard measure for "mostly the same text" and MinHash estimates it in O(words)
   per text without comparing every pair.

The harvester compares texts only within a group (same class, same normalised question):
the question is short, so a different question would barely move the Jaccard estimate
of a long shared document, yet it makes a different task.

Exact normalised-template hashing alone would miss templates with a different name in
them; MinHash alone on raw text would see "order 1234" and "order 9876" as different
shingles. Deterministic: the permutations come from a fixed seed.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

import numpy as np

NUM_PERM = 64
BANDS = 16
ROWS = NUM_PERM // BANDS
DEFAULT_THRESHOLD = 0.8
_PRIME = (1 << 31) - 1  # Mersenne prime: a * x + b stays within 64 bits
_SLOTS = re.compile(
    r"\[redacted:[a-z-]+\]"
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"
    r"|\d+(?:[.,:/-]\d+)*",
)
_SPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """The template of a text: lower case, slots (numbers, ids) as `#`, single spaces."""
    return _SPACE.sub(" ", _SLOTS.sub("#", text.lower())).strip()


def _shingles(template: str) -> np.ndarray:
    words = template.split(" ")
    grams = [" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2))]
    hashes = {
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little") for g in grams
    }
    return np.fromiter(hashes, dtype=np.uint64, count=len(hashes))


@functools.cache
def _permutations() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20261130)
    a = rng.integers(1, _PRIME, size=NUM_PERM, dtype=np.uint64)
    b = rng.integers(0, _PRIME, size=NUM_PERM, dtype=np.uint64)
    return a, b


def signature(template: str) -> np.ndarray:
    """MinHash signature (NUM_PERM values) of a normalised text's 3-shingles."""
    a, b = _permutations()
    x = _shingles(template) % np.uint64(_PRIME)
    values = (np.outer(x, a) + b) % np.uint64(_PRIME)
    minimum: np.ndarray = values.min(axis=0)
    return minimum


def find_duplicates(
    texts: Sequence[str],
    threshold: float = DEFAULT_THRESHOLD,
    *,
    groups: Sequence[str] | None = None,
) -> list[int | None]:
    """For each text, the index of an earlier text it duplicates, or None if it is first.

    The earliest text of a group is kept; later ones point at a kept one. With `groups`,
    only texts of the same group can duplicate each other (the harvester groups by class
    and question template, so two questions about one document stay two tasks).
    """
    result: list[int | None] = [None] * len(texts)
    members: dict[str, list[int]] = {}
    for index in range(len(texts)):
        members.setdefault(groups[index] if groups is not None else "", []).append(index)
    for indices in members.values():
        local = _find_in([normalize(texts[i]) for i in indices], threshold)
        for position, match in enumerate(local):
            if match is not None:
                result[indices[position]] = indices[match]
    return result


def _find_in(templates: list[str], threshold: float) -> list[int | None]:
    result: list[int | None] = [None] * len(templates)
    exact: dict[str, int] = {}
    signatures: dict[int, np.ndarray] = {}
    buckets: dict[tuple[int, bytes], list[int]] = {}
    for i, template in enumerate(templates):
        if template in exact:
            result[i] = exact[template]
            continue
        sig = signature(template)
        candidates: set[int] = set()
        keys = [(band, sig[band * ROWS : (band + 1) * ROWS].tobytes()) for band in range(BANDS)]
        for key in keys:
            candidates.update(buckets.get(key, ()))
        match = next(
            (j for j in sorted(candidates) if float(np.mean(signatures[j] == sig)) >= threshold),
            None,
        )
        if match is not None:
            result[i] = match
            continue
        exact[template] = i
        signatures[i] = sig
        for key in keys:
            buckets.setdefault(key, []).append(i)
    return result

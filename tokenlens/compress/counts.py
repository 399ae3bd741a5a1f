"""Token counts kept between requests: each distinct text is tokenized once per process.

A conversation resends every earlier text on each turn, and tokenizing a long text costs
more than compressing it from the tool-output memo; the proxy counts every body it
compresses, for its statistics. One memo for the tool-output rungs and the body counts,
so a rewrite counted when it was made is not counted again in the body's total.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tokenlens.tokens import estimate_tokens

#: How many counts each memo keeps (then it starts over): a 50k-token agent conversation
#: holds a few hundred texts.
COUNT_MEMO_ENTRIES = 8192


class TokenCounts:
    """Token counts kept by their key's 64-bit hash, never the key itself: the memo holds
    no prompt text. Two keys with one hash (odds ~2^-64 a pair) would share a count."""

    def __init__(self) -> None:
        self._by_hash: dict[int, int] = {}
        self._lock = threading.Lock()  # proxy workers count in threads

    def get(self, key: str | bytes, text: Callable[[], str]) -> int:
        digest = hash(key)
        count = self._by_hash.get(digest)
        if count is None:
            count = estimate_tokens(text())
            with self._lock:
                if len(self._by_hash) >= COUNT_MEMO_ENTRIES:
                    self._by_hash.clear()
                self._by_hash[digest] = count
        return count

    def clear(self) -> None:
        with self._lock:
            self._by_hash.clear()


_TEXTS = TokenCounts()


def text_tokens(text: str) -> int:
    """`estimate_tokens(text)`, counted once per process while kept (see `TokenCounts`)."""
    return _TEXTS.get(text, lambda: text)

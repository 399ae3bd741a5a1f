"""The exact-prompt state cache of the local backend: evaluated prompts, LRU by bytes.

Kept apart from `tokenlens.models.local` because it is plain data structure code, tested
without a model; `local` explains why the cache exists and how it keeps seeds exact.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llama_cpp.llama import LlamaState


@dataclass(frozen=True)
class PromptState:
    """A context saved right after evaluating one prompt, and what keeping it costs."""

    state: LlamaState
    nbytes: int

    @classmethod
    def save(cls, llm: Any) -> PromptState:
        state = llm.save_state()
        nbytes = state.llama_state_size + state.scores.nbytes + state.input_ids.nbytes
        return cls(state, int(nbytes))


class PromptStateCache:
    """Evaluated prompts keyed by their exact chat messages; least recently used goes first.

    Not thread-safe on its own: it is used under the model's generation lock.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[str, PromptState] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> PromptState | None:
        state = self._entries.get(key)
        if state is not None:
            self._entries.move_to_end(key)
        return state

    def put(self, key: str, state: PromptState, max_bytes: int) -> None:
        """Store `state`, evicting the oldest entries to stay within `max_bytes`."""
        self.discard(key)
        if state.nbytes > max_bytes:
            return
        while self._entries and self.nbytes + state.nbytes > max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.nbytes -= evicted.nbytes
        self._entries[key] = state
        self.nbytes += state.nbytes

    def discard(self, key: str) -> None:
        state = self._entries.pop(key, None)
        if state is not None:
            self.nbytes -= state.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

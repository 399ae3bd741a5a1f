"""The local backend's shared state: evaluated prompts (LRU by bytes) and the pool of
model copies that share them.

Kept apart from `tokenlens.models.local` because it is plain data structure and
coordination code, tested without a model; `local` explains why the cache exists and how
it keeps seeds exact.
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


class ModelPool:
    """Up to `size` interchangeable copies of one loaded model, and the prompt states they
    share.

    Why copies: llama-cpp-python has no batched generation across requests, and a llama.cpp
    context is not thread-safe, so one copy answers one request at a time. Two
    single-threaded copies on two cores answer two requests at once, where one copy with two
    threads synchronises its threads at every layer and measured slower as soon as other
    work shared the CPU. A state saved from one copy loads into another (same file, same
    context size), so the cache is shared; a prompt being evaluated is evaluated once, and
    a second request for it waits for that state instead of evaluating it again.

    `factory` makes a copy (called lazily, at most `size` times).
    """

    def __init__(self, factory: Callable[[], Any], size: int) -> None:
        if size < 1:
            raise ValueError(f"a model pool needs at least one copy, got {size}")
        self.size = size
        self.cache = PromptStateCache()
        self._factory = factory
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made = 0
        self._lock = threading.Lock()
        self._pending: dict[str, threading.Event] = {}

    @property
    def copies(self) -> int:
        """How many copies were made so far."""
        return self._made

    @contextmanager
    def instance(self) -> Iterator[Any]:
        """A copy for this caller alone until the block ends (made if none is free)."""
        llm = self._take()
        try:
            yield llm
        finally:
            self._free.put(llm)

    def close(self) -> None:
        """Free every copy not in use now (llama-cpp-python's `close`).

        Called at interpreter exit (`tokenlens.models.local`): a copy left to the garbage
        collector is freed after llama_cpp's module globals are torn down, and its
        destructor prints a `TypeError` traceback on every exit."""
        while True:
            try:
                llm = self._free.get_nowait()
            except queue.Empty:
                return
            close = getattr(llm, "close", None)
            if close is not None:
                close()

    def _take(self) -> Any:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            make = self._made < self.size
            if make:
                self._made += 1
        if not make:
            return self._free.get()
        try:
            return self._factory()
        except BaseException:
            with self._lock:
                self._made -= 1
            raise

    def cached_or_claim(self, key: str) -> tuple[PromptState | None, bool]:
        """The cached state of `key`, or (None, True): the caller evaluates the prompt and
        must `publish` (a state, or None when it failed) so that waiters go on. Waits while
        another caller evaluates the same prompt."""
        while True:
            with self._lock:
                state = self.cache.get(key)
                if state is not None:
                    return state, False
                event = self._pending.get(key)
                if event is None:
                    self._pending[key] = threading.Event()
                    return None, True
            event.wait()

    def publish(self, key: str, state: PromptState | None, max_bytes: int) -> None:
        """Keep `state` (if any and it fits) and wake whoever waits for `key`."""
        with self._lock:
            if state is not None:
                self.cache.put(key, state, max_bytes)
            event = self._pending.pop(key, None)
        if event is not None:
            event.set()

    def discard(self, key: str) -> None:
        with self._lock:
            self.cache.discard(key)

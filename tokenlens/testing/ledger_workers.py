"""Processes that hammer one ledger location, for the concurrency tests and the bench.

They live in the package (not in a test file) because ``spawn`` children must import
their target by module name.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tokenlens.ledger import Ledger, LedgerClient, call_key
from tokenlens.models.base import Completion, CompletionRequest, Message, Usage

CLIENT = "worker-fake"


def request_for(key_index: int) -> CompletionRequest:
    """The request of cell `key_index` (so every worker derives the same key for it)."""
    return CompletionRequest(
        model="claude-haiku-4-5",
        messages=(Message(role="user", content=f"question {key_index}"),),
        max_tokens=16,
        seed=key_index,
    )


def key_for(key_index: int) -> str:
    return call_key(CLIENT, request_for(key_index))


class FakeClient:
    """A paid backend stand-in: answers with who paid, optionally after a delay."""

    name = CLIENT

    def __init__(self, worker: str, delay: float = 0.0):
        self.worker = worker
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: CompletionRequest) -> Completion:
        with self._lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return Completion(
            text=f"{self.worker} answered {request.messages[-1].content}",
            usage=Usage(input_tokens=3, output_tokens=2),
            model=request.model,
            stop_reason="end_turn",
            cost_usd=0.001,
            backend="fake",
        )


def record_keys(
    root: str, worker: str, indices: list[int], acks: Any = None, delay: float = 0.0
) -> None:
    """Obtain the answer of every cell in `indices` through a ledger at `root`.

    After each answer is stored, ``(worker, index, answer text)`` goes to the `acks`
    queue, so a parent can tell which calls were acknowledged before it killed us.
    """
    client = LedgerClient(FakeClient(worker, delay), Ledger(root))
    for index in indices:
        completion = client.complete(request_for(index))
        if acks is not None:
            acks.put((worker, index, completion.text))
    if acks is not None:
        acks.put((worker, -1, f"paid={client.stats.new} cached={client.stats.cached}"))


def compact_until(root: str, stop: Any, pause: float = 0.05) -> None:
    """Compact the ledger at `root` again and again until `stop` (an Event) is set."""
    ledger = Ledger(root)
    while not stop.is_set():
        ledger.compact()
        time.sleep(pause)
    ledger.compact()

"""Bounded fire-and-forget work (exact counts, shadow judgements) off the hot path.

Why bounded and dropping: background work must never slow or grow without limit under
load. When `limit` jobs are running, a new one is dropped and counted, not queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("tokenlens.proxy")


class BackgroundWork:
    def __init__(self, limit: int, on_drop: Callable[[], None]) -> None:
        self.limit = limit
        self._on_drop = on_drop
        self._tasks: set[asyncio.Task[None]] = set()
        self._held = 0

    @property
    def pending(self) -> int:
        """Running jobs plus responses whose follow-up work has not been handed over yet."""
        return len(self._tasks) + self._held

    def hold(self) -> None:
        """Announce follow-up work that starts once a response has been relayed."""
        self._held += 1

    def release(self) -> None:
        self._held = max(0, self._held - 1)

    def spawn(self, make: Callable[[], Awaitable[None]]) -> bool:
        """Start `make()` unless `limit` jobs are running; False when dropped."""
        if len(self._tasks) >= self.limit:
            self._on_drop()
            return False
        task = asyncio.get_running_loop().create_task(self._guard(make))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    @staticmethod
    async def _guard(make: Callable[[], Awaitable[None]]) -> None:
        try:
            await make()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # background work never takes the server down
            log.warning("background job failed (%s)", type(exc).__name__)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

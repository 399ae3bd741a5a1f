"""Bounded concurrent execution of model calls, with progress and a spend stop.

Why not one Prefect task per call: thousands of tiny task runs cost more in API round
trips than the calls themselves, and the ledger already makes each call idempotent. A
stage runs its calls on a thread pool of `concurrency` workers and schedules the next call
only when a worker is free, so it never queues more than it can send, and once the spend
cap is reached it simply stops scheduling: calls in flight finish and are kept.
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from tokenlens.errors import SpendLimitReached, UpstreamUnavailable
from tokenlens.ledger import SpendMeter

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class Progress(Protocol):
    """Where a stage reports how far it got (terminal bar, Prefect artifact, or nothing)."""

    def start(self, stage: str, total: int) -> None: ...

    def advance(self, stage: str, done: int, total: int, cached: int = 0) -> None:
        """`done` of `total` finished; `cached` of those needed no new call (a ledger
        hit, a metric grade), so a rate and an ETA count only the others."""
        ...

    def finish(self, stage: str) -> None: ...


class NoProgress:
    def start(self, stage: str, total: int) -> None:
        pass

    def advance(self, stage: str, done: int, total: int, cached: int = 0) -> None:
        pass

    def finish(self, stage: str) -> None:
        pass


@dataclass
class Outcome(Generic[K, R]):
    """Results by key; `errors` holds exceptions by key; `skipped` were never scheduled;
    `unavailable` is set when a circuit breaker opened and stopped the stream."""

    results: dict[K, R] = field(default_factory=dict)
    errors: dict[K, BaseException] = field(default_factory=dict)
    skipped: list[K] = field(default_factory=list)
    unavailable: UpstreamUnavailable | None = None

    @property
    def stopped_by_spend(self) -> bool:
        return bool(self.skipped) and self.unavailable is None


def run_bounded(
    keys: Sequence[K],
    fn: Callable[[K], R],
    *,
    concurrency: int,
    spend: SpendMeter,
    progress: Progress,
    stage: str,
) -> Outcome[K, R]:
    """Run `fn(key)` for every key, at most `concurrency` at a time.

    Exceptions become `errors[key]` (the stage turns them into error rows). A
    `SpendLimitReached` stops scheduling; keys not yet started land in `skipped`.
    """
    total = len(keys)
    progress.start(stage, total)
    done = 0

    def count(key: K, result: R | BaseException) -> Iterable[K]:
        nonlocal done
        done += 1
        progress.advance(stage, done, total)
        return ()

    outcome = run_stream(keys, fn, then=count, concurrency=concurrency, spend=spend, name=stage)
    progress.finish(stage)
    return outcome


def run_stream(
    first: Sequence[K],
    fn: Callable[[K], R],
    *,
    then: Callable[[K, R | BaseException], Iterable[K]],
    concurrency: int,
    spend: SpendMeter,
    name: str,
    started: Callable[[], None] | None = None,
    awaiting: Mapping[Future[Any], K] | None = None,
) -> Outcome[K, R]:
    """Run `fn(key)` for every key of `first` and every key `then` releases, at most
    `concurrency` at a time: work whose inputs are other work's results starts the moment
    they exist, with no barrier between the kinds (a pair is judged as soon as both its
    answers are in while other answers are still being asked).

    `then(key, result or exception)` runs on the caller's thread once `key` finished, and
    returns the keys that may start now. Keys of `first` are started before
    released ones, so every worker stays busy until the last released key. A
    `SpendLimitReached` stops scheduling as in `run_bounded`, and so does an
    `UpstreamUnavailable` (a circuit breaker opened: kept in `outcome.unavailable`);
    `skipped` holds the keys left in either queue (a key whose inputs were skipped is
    never released).
    `started()`, if given, runs once the first keys are in flight (side work that should
    not delay them).

    `awaiting` maps futures of work done elsewhere (another stage running beside this one)
    to a key of their own: when one is done, `then(key, its result or exception)` runs as
    for a key of the pool, without holding a worker while it waits, and the keys it
    returns join `first`'s queue (work that was not known at the start). The stream ends
    only once every awaited future is done, even when the spend cap stopped it.
    """
    outcome: Outcome[K, R] = Outcome()
    pending: dict[Future[R], K] = {}
    outside: dict[Future[Any], K] = dict(awaiting or {})
    queue = deque(first)
    released: deque[K] = deque()
    stop = False
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix=name)
    try:
        while queue or released or pending or outside:
            while (queue or released) and not stop and len(pending) < concurrency:
                if spend.exhausted:
                    stop = True
                    break
                key = queue.popleft() if queue else released.popleft()
                # In the caller's context: a log line of the call (a retry's warning)
                # then reaches the flow run's log, which is found through it.
                pending[pool.submit(contextvars.copy_context().run, fn, key)] = key
            if started is not None:
                started()
                started = None
            if stop and not pending and not outside:
                break
            finished, _ = wait([*pending, *outside], return_when=FIRST_COMPLETED)
            for future in finished:
                if future in outside:
                    key = outside.pop(future)
                    exc = future.exception()
                    queue.extend(then(key, exc if exc is not None else future.result()))
                    continue
                key = pending.pop(future)
                exc = future.exception()
                if isinstance(exc, SpendLimitReached):
                    stop = True
                    queue.appendleft(key)
                    continue
                if isinstance(exc, UpstreamUnavailable):
                    stop = True
                    outcome.unavailable = outcome.unavailable or exc
                if exc is not None:
                    outcome.errors[key] = exc
                    released.extend(then(key, exc))
                else:
                    result = outcome.results[key] = future.result()
                    released.extend(then(key, result))
    finally:
        # On an interrupt (Ctrl-C, SIGTERM) do not wait for calls in flight: each one that
        # finishes is journaled by the ledger anyway, and the rest are simply not made.
        pool.shutdown(wait=not pending, cancel_futures=True)
    outcome.skipped = [*queue, *released]
    return outcome

"""Bounded concurrency and the spend stop of `run_bounded`; work awaited beside a stream."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from tokenlens.calibration.runner import NoProgress, run_bounded, run_stream
from tokenlens.errors import SpendLimitReached
from tokenlens.ledger import SpendMeter
from tokenlens.models.base import Completion


def test_never_more_than_concurrency_in_flight() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def work(key: int) -> int:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return key * 2

    outcome = run_bounded(
        list(range(20)), work, concurrency=3, spend=SpendMeter(), progress=NoProgress(), stage="t"
    )
    assert outcome.results == {k: 2 * k for k in range(20)}
    assert state["peak"] == 3


def test_errors_are_collected_per_key() -> None:
    def work(key: int) -> int:
        if key % 2:
            raise ValueError(f"odd {key}")
        return key

    outcome = run_bounded(
        list(range(6)), work, concurrency=2, spend=SpendMeter(), progress=NoProgress(), stage="t"
    )
    assert sorted(outcome.results) == [0, 2, 4]
    assert sorted(outcome.errors) == [1, 3, 5]
    assert not outcome.stopped_by_spend


def test_spend_cap_stops_scheduling_and_reports_skipped() -> None:
    spend = SpendMeter(max_spend=0.3)
    started: list[int] = []

    def work(key: int) -> int:
        started.append(key)
        spend.check()
        spend.add(Completion(text="x", model="m", cost_usd=0.1))
        return key

    outcome = run_bounded(
        list(range(10)), work, concurrency=1, spend=spend, progress=NoProgress(), stage="t"
    )
    assert sorted(outcome.results) == [0, 1, 2]
    assert outcome.stopped_by_spend
    assert sorted(outcome.skipped) == list(range(3, 10))
    assert set(started).isdisjoint(range(4, 10))


def test_spend_error_from_a_worker_requeues_its_key() -> None:
    def work(key: int) -> int:
        raise SpendLimitReached("cap")

    outcome = run_bounded(
        [1, 2], work, concurrency=1, spend=SpendMeter(), progress=NoProgress(), stage="t"
    )
    assert outcome.results == {} and outcome.errors == {}
    assert 1 in outcome.skipped


def test_awaited_work_holds_no_worker_and_its_keys_join_the_stream() -> None:
    """With one worker, work done elsewhere (here: set by key 1 itself) is awaited beside
    the pool's keys; the keys its `then` returns run after it, before released ones."""
    compressed: Future[list[str]] = Future()
    ran: list[object] = []

    def work(key: object) -> object:
        ran.append(key)
        if key == 1:
            compressed.set_result(["a", "b"])  # a held worker would never get here
        return key

    def then(key: object, result: object) -> list[object]:
        if key == "outside":
            assert result == ["a", "b"]
            return ["a", "b"]
        return ["judge"] if key == 2 else []

    outcome = run_stream(
        [1, 2],
        work,
        then=then,
        concurrency=1,
        spend=SpendMeter(),
        name="t",
        awaiting={compressed: "outside"},
    )
    assert ran == [1, 2, "a", "b", "judge"]
    assert "outside" not in outcome.results


def test_a_spend_stop_still_waits_for_awaited_work() -> None:
    spend = SpendMeter(max_spend=0.1)
    later: Future[str] = Future()
    threading.Timer(0.1, later.set_result, args=("done",)).start()

    def work(key: object) -> object:
        spend.add(Completion(text="x", model="m", cost_usd=0.1))
        return key

    outcome = run_stream(
        [1, 2],
        work,
        then=lambda key, result: ["late"] if key == "outside" else [],
        concurrency=1,
        spend=spend,
        name="t",
        awaiting={later: "outside"},
    )
    assert later.done() and outcome.stopped_by_spend
    assert outcome.skipped == [2, "late"]


def test_a_failed_awaited_future_reaches_then() -> None:
    broken: Future[str] = Future()
    broken.set_exception(RuntimeError("broken"))
    seen: list[object] = []

    def then(key: object, result: object) -> list[object]:
        seen.append(result)
        if isinstance(result, BaseException):
            raise result
        return []

    with pytest.raises(RuntimeError, match="broken"):
        run_stream(
            [],
            lambda key: key,
            then=then,
            concurrency=1,
            spend=SpendMeter(),
            name="t",
            awaiting={broken: "outside"},
        )
    assert len(seen) == 1

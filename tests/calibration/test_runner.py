"""Bounded concurrency and the spend stop of `run_bounded`."""

from __future__ import annotations

import threading
import time

from tokenlens.calibration.runner import NoProgress, run_bounded
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

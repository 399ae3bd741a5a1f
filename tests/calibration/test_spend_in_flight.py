"""The spend artifact says what the ledger cannot hold: calls in flight when an earlier
attempt was killed, which the upstream may have billed. Each paid call leaves an intent
in the ledger's store before it is sent, removed once it ended; what a kill leaves
behind is counted exactly (the real kill is in `tests/calibration/test_resume.py`)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.test_ledger import CountingClient, request
from tokenlens.calibration.summary import RunSpend, spend_text
from tokenlens.errors import ModelCallError
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter
from tokenlens.models.base import Completion, CompletionRequest


def test_a_resumed_run_states_the_calls_a_kill_left_in_flight() -> None:
    run = RunSpend(run_id="r1", calls=414, usd=1.23, unpriced=0, attempts=2, in_flight=8)
    text = spend_text(SpendMeter(5.0), None, run)
    assert "Spent: 414 paid calls, $1.2300 over 2 attempts" in text
    assert "In flight at a kill: 8 calls sent with no answer stored" in text
    assert "the upstream may have billed them" in text


def test_a_resume_after_a_clean_stop_says_none_were_in_flight() -> None:
    run = RunSpend(run_id="r1", calls=10, usd=0.1, unpriced=0, attempts=2)
    assert "In flight at a kill: none" in spend_text(SpendMeter(None), None, run)
    once = RunSpend(run_id="r1", calls=10, usd=0.1, unpriced=0, attempts=1)
    assert "In flight" not in spend_text(SpendMeter(None), None, once)


class Blocking(CountingClient):
    """Holds every call until released: the calls a kill would catch in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Semaphore(0)

    def complete(self, req: CompletionRequest) -> Completion:
        self.started.release()
        self.release.wait(10)
        return super().complete(req)


class Failing(CountingClient):
    def complete(self, req: CompletionRequest) -> Completion:
        raise ModelCallError("upstream said 500")


def test_intents_count_the_calls_under_way_and_leave_none_for_ended_calls(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    ledger = Ledger(root, run="r1")
    done = LedgerClient(CountingClient(), ledger)
    done.complete(request("answered"))
    with pytest.raises(ModelCallError):
        LedgerClient(Failing(), ledger).complete(request("failed"))
    assert Ledger(root, run="r1").in_flight("r1") == 0  # answered or failed: ended

    blocking = Blocking()
    client = LedgerClient(blocking, ledger)
    threads = [
        threading.Thread(target=client.complete, args=(request(f"held {i}"),)) for i in range(3)
    ]
    for thread in threads:
        thread.start()
    for _ in threads:
        assert blocking.started.acquire(timeout=10)
    # Another process (a resumed attempt) sees the three as in flight; this one does
    # not count its own calls still under way, nor does another run.
    assert Ledger(root, run="r1").in_flight("r1") == 3
    assert ledger.in_flight("r1") == 0
    assert Ledger(root, run="r2").in_flight("r2") == 0
    blocking.release.set()
    for thread in threads:
        thread.join(10)
    assert Ledger(root, run="r1").in_flight("r1") == 0
    assert len(Ledger(root)) == 4  # answered ones stored; nothing else written to calls

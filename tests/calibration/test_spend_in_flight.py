"""The spend artifact says what the ledger cannot hold: calls in flight when an earlier
attempt was killed, which the upstream may have billed (a count, with its bound)."""

from __future__ import annotations

from tokenlens.calibration.summary import RunSpend, spend_text
from tokenlens.ledger import SpendMeter


def test_a_resumed_run_states_the_calls_a_kill_may_have_left_unrecorded() -> None:
    run = RunSpend(run_id="r1", calls=414, usd=1.23, unpriced=0, attempts=2)
    text = spend_text(SpendMeter(5.0), None, run, concurrency=4)
    assert "Spent: 414 paid calls, $1.2300 over 2 attempts" in text
    assert "up to 4 more calls" in text and "1 earlier attempt" in text
    assert "the upstream may have billed them" in text


def test_a_run_of_one_attempt_has_no_such_line() -> None:
    run = RunSpend(run_id="r1", calls=10, usd=0.1, unpriced=0, attempts=1)
    assert "earlier attempt" not in spend_text(SpendMeter(None), None, run, concurrency=4)

"""The pay stage starts before compression ends: the cleartext and control answers need no
compressed body, so they are asked while the arms are compressed (issue 27); the arms'
answers join the stream once the compressions are in, and every table and the policy are
the ones of compressing first (the golden run's stages, `golden.py`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.calibration.golden import digests, golden_config, loopback_run, snapshot
from tokenlens.calibration import stages
from tokenlens.calibration.session import open_calibration
from tokenlens.ledger import Ledger
from tokenlens.tables import CompressionRow
from tokenlens.testing import FakeAnthropic


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(seed=11) as fake:  # the golden run's server
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        yield fake


def answers_asked(server: FakeAnthropic) -> int:
    return sum(1 for r in server.calls() if not r.is_judge)


def wait_until_idle(server: FakeAnthropic, at_least: int, quiet_s: float = 0.5) -> None:
    """Until the server has seen `at_least` answer calls, then no new request for
    `quiet_s` (the stream waits); the first call imports the SDK, seconds under load."""
    deadline = time.monotonic() + 60
    while answers_asked(server) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    while not any(r.is_judge for r in server.calls()) and time.monotonic() < deadline:
        time.sleep(0.05)  # the control pairs' judging has begun (seen, not waited for)
    seen, since = len(server.calls()), time.monotonic()
    while time.monotonic() - since < quiet_s:
        time.sleep(0.05)
        if len(server.calls()) != seen:
            seen, since = len(server.calls()), time.monotonic()


def test_cleartext_and_control_answers_are_paid_while_the_arms_are_compressed(
    tmp_path: Path, server: FakeAnthropic
) -> None:
    config = golden_config(tmp_path)
    cal, tasks = open_calibration(config)
    stages.load_stage(config, cal.store, tasks, cal.model)
    compressions = stages.compress_stage(cal, tasks)
    compressing: Future[list[CompressionRow]] = Future()  # compression "still running"
    paid: list[stages.Paid] = []
    paying = threading.Thread(target=lambda: paid.append(stages.pay_stage(cal, tasks, compressing)))
    paying.start()
    uncompressed = 2 * len(tasks) * config.repeats  # each replicate's cleartext and control
    try:
        wait_until_idle(server, uncompressed)
        # Everything that needs no compressed body (the answers, and the control pairs'
        # judge calls), nothing else.
        assert answers_asked(server) == uncompressed
        assert any(r.is_judge for r in server.calls())
        assert paying.is_alive() and not paid
    finally:
        compressing.set_result(compressions)
        paying.join(timeout=120)
    assert paid and not paying.is_alive()
    stages.publish_stage(
        cal,
        stages.aggregate_stage(cal, paid[0].grades),
        paid[0].grades,
        list(config.classes),
        None,
        tasks,
    )
    found = digests(snapshot(Path(config.store), Path(config.reports), cal.store.run_id))
    # The same tables and policy as compressing first, then paying (the golden run's way).
    assert found == digests(loopback_run(tmp_path / "compressed-first"))


def test_a_failed_compression_fails_the_pay_stage(tmp_path: Path, server: FakeAnthropic) -> None:
    config = golden_config(tmp_path)
    cal, tasks = open_calibration(config)
    compressing: Future[list[CompressionRow]] = Future()
    failed: list[BaseException] = []

    def pay() -> None:
        try:
            stages.pay_stage(cal, tasks, compressing)
        except RuntimeError as exc:
            failed.append(exc)

    paying = threading.Thread(target=pay)
    paying.start()
    wait_until_idle(server, 2 * len(tasks) * config.repeats)
    compressing.set_exception(RuntimeError("the compress stage broke"))
    paying.join(timeout=60)
    assert [str(exc) for exc in failed] == ["the compress stage broke"]
    # What was paid meanwhile is kept: a rerun finds it in the ledger.
    assert len(Ledger(cal.calls.ledger.root)) == answers_asked(server) + sum(
        1 for r in server.calls() if r.is_judge
    )

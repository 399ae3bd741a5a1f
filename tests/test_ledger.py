"""The call ledger: keys, durability, compaction, caching through LedgerClient, spend."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tokenlens.errors import ModelCallError, SpendLimitReached
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter, call_key
from tokenlens.models.base import Completion, CompletionRequest, Message, Usage
from tokenlens.models.retry import TruncatedOutputError
from tokenlens.tables import CALLS


def in_parallel(work: Callable[[int], None], n: int) -> None:
    """Run work(0..n-1) on n threads at once and wait for all of them."""
    with ThreadPoolExecutor(max_workers=n) as pool:
        list(pool.map(work, range(n)))


def request(
    text: str = "hello", *, seed: int = 0, model: str = "claude-haiku-4-5"
) -> CompletionRequest:
    return CompletionRequest(
        model=model, messages=(Message(role="user", content=text),), max_tokens=64, seed=seed
    )


class CountingClient:
    """A ModelClient that answers with a counter, optionally slowly or cut off."""

    name = "counting"

    def __init__(self, *, delay: float = 0.0, cost: float | None = 0.01, cut: bool = False):
        self.calls = 0
        self.delay = delay
        self.cost = cost
        self.cut = cut
        self._lock = threading.Lock()

    def complete(self, req: CompletionRequest) -> Completion:
        with self._lock:
            self.calls += 1
            n = self.calls
        time.sleep(self.delay)
        completion = Completion(
            text=f"answer {n} to {req.messages[-1].content}",
            usage=Usage(input_tokens=10, output_tokens=5),
            model=req.model,
            stop_reason="max_tokens" if self.cut else "end_turn",
            cost_usd=self.cost,
            backend="counting",
        )
        if self.cut:
            raise TruncatedOutputError("cut off", completion)
        return completion


def test_key_changes_with_everything_that_determines_a_call() -> None:
    base = call_key("anthropic", request())
    assert call_key("anthropic", request()) == base
    variants = {
        call_key("local", request()),
        call_key("anthropic", request(seed=1)),
        call_key("anthropic", request("hello!")),
        call_key("anthropic", request(model="claude-sonnet-4-5")),
        call_key("anthropic", request(), salt="judge-prompt:v1"),
        call_key("anthropic", request().model_copy(update={"max_tokens": 65})),
        call_key("anthropic", request().model_copy(update={"temperature": 0.5})),
    }
    assert base not in variants
    assert len(variants) == 7


def test_a_put_call_survives_a_new_process_view(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    req = request()
    client = CountingClient()
    completion = client.complete(req)
    ledger.put(call_key("c", req), kind="answer", client="c", request=req, completion=completion)
    # No close, no compact: what a SIGKILL leaves behind. A fresh instance must see it.
    again = Ledger(tmp_path)
    assert again.get(call_key("c", req)) == completion
    assert len(list(tmp_path.glob("journal-*.jsonl"))) == 1


def test_a_torn_last_journal_line_is_skipped(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    req = request()
    ledger.put(
        "k1", kind="answer", client="c", request=req, completion=CountingClient().complete(req)
    )
    journal = next(tmp_path.glob("journal-*.jsonl"))
    with journal.open("a", encoding="utf-8") as handle:
        handle.write('{"key": "k2", "kind": "ans')  # killed mid-write
    again = Ledger(tmp_path)
    assert "k1" in again and "k2" not in again


def _paid(ledger: Ledger, count: int) -> None:
    """`count` answers recorded under keys k0, k1, ..."""
    client = CountingClient()
    for i in range(count):
        req = request(f"q{i}")
        ledger.put(f"k{i}", kind="answer", client="c", request=req, completion=client.complete(req))


def test_compaction_folds_journals_into_parquet(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    _paid(ledger, 3)
    path = ledger.compact()
    assert not list(tmp_path.glob("journal-*.jsonl"))
    table = pq.read_table(path)
    assert table.schema.remove_metadata().equals(CALLS)
    assert sorted(table.column("key").to_pylist()) == ["k0", "k1", "k2"]
    reread = Ledger(tmp_path)
    assert len(reread) == 3
    assert reread.get("k1") == ledger.get("k1")


def test_ledger_client_pays_once_per_key(tmp_path: Path) -> None:
    inner = CountingClient()
    client = LedgerClient(inner, Ledger(tmp_path))
    first = client.complete(request())
    assert client.complete(request()) == first
    client.complete(request(seed=1))
    assert inner.calls == 2
    assert (client.stats.new, client.stats.cached) == (2, 1)
    # A new process (new ledger view) does not pay again either.
    again = LedgerClient(inner, Ledger(tmp_path))
    assert again.complete(request()) == first
    assert inner.calls == 2


def test_concurrent_requests_for_one_key_make_one_call(tmp_path: Path) -> None:
    inner = CountingClient(delay=0.2)
    client = LedgerClient(inner, Ledger(tmp_path))
    results: list[Completion] = []
    threads = [
        threading.Thread(target=lambda: results.append(client.complete(request())))
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert inner.calls == 1
    assert len({r.text for r in results}) == 1


def test_a_cut_off_answer_is_kept_but_still_an_error(tmp_path: Path) -> None:
    inner = CountingClient(cut=True)
    client = LedgerClient(inner, Ledger(tmp_path))
    with pytest.raises(TruncatedOutputError):
        client.complete(request())
    with pytest.raises(TruncatedOutputError) as again:
        client.complete(request())
    assert inner.calls == 1  # paid once, replayed as the same failure
    assert isinstance(again.value.completion, Completion)


def test_failed_calls_are_not_stored(tmp_path: Path) -> None:
    class Failing:
        name = "failing"

        def complete(self, req: CompletionRequest) -> Completion:
            raise ModelCallError("boom", retryable=True, status=500)

    client = LedgerClient(Failing(), Ledger(tmp_path))
    with pytest.raises(ModelCallError):
        client.complete(request())
    assert client.stats.failed == 1
    assert len(client.ledger) == 0


def test_spend_cap_stops_new_calls_but_not_cached_ones(tmp_path: Path) -> None:
    inner = CountingClient(cost=0.5)
    spend = SpendMeter(max_spend=1.0)
    client = LedgerClient(inner, Ledger(tmp_path), spend=spend)
    client.complete(request("a"))
    client.complete(request("b"))
    with pytest.raises(SpendLimitReached):
        client.complete(request("c"))
    assert inner.calls == 2
    assert spend.spent == pytest.approx(1.0)
    client.complete(request("a"))  # stored: still answered, costs nothing
    assert inner.calls == 2


def test_each_call_names_the_run_that_paid_it_across_processes_and_compaction(
    tmp_path: Path,
) -> None:
    """A run's spend adds up over its attempts (a crashed process's journal included)
    and shards (another process stamping the same run); older records have no run."""
    inner = CountingClient(cost=0.25)
    LedgerClient(inner, Ledger(tmp_path)).complete(request("before the field"))
    crashed = LedgerClient(inner, Ledger(tmp_path, run="run-1"))  # never compacted
    crashed.complete(request("a"))
    shard = LedgerClient(inner, Ledger(tmp_path, run="run-1", compacts=False))
    shard.complete(request("b"))
    assert shard.ledger.compact() and list(tmp_path.glob("journal-*.jsonl"))  # a no-op
    other = LedgerClient(inner, Ledger(tmp_path, run="run-2"))
    other.complete(request("a"))  # a hit: run-1 paid for it
    other.complete(request("c"))
    retry = Ledger(tmp_path, run="run-1")
    assert sorted(r.request.messages[0].content for r in retry.paid_by("run-1")) == ["a", "b"]
    retry.compact()  # through Parquet and back
    reread = Ledger(tmp_path)
    assert [r.request.messages[0].content for r in reread.paid_by("run-2")] == ["c"]
    assert len(reread.paid_by("run-1")) == 2 and len(reread.paid_by("")) == 1


def test_the_cap_counts_what_earlier_attempts_paid(tmp_path: Path) -> None:
    spend = SpendMeter(max_spend=1.0, carried=0.75)
    client = LedgerClient(CountingClient(cost=0.5), Ledger(tmp_path), spend=spend)
    client.complete(request("a"))  # 0.75 + 0 < 1.0: allowed
    with pytest.raises(SpendLimitReached, match=r"\$0.7500 before it"):
        client.complete(request("b"))
    assert (spend.spent, spend.new_calls) == (0.5, 1)


def test_unpriced_calls_are_counted_not_priced(tmp_path: Path) -> None:
    spend = SpendMeter(max_spend=0.01)
    client = LedgerClient(CountingClient(cost=None), Ledger(tmp_path), spend=spend)
    for i in range(3):
        client.complete(request(str(i)))
    assert (spend.spent, spend.unpriced_calls, spend.new_calls) == (0.0, 3, 3)


def test_concurrent_puts_share_fsyncs_and_each_returns_only_once_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import os

    import tokenlens.ledger_store as ledger_store

    ledger = Ledger(tmp_path)
    synced: set[str] = set()
    fsyncs = 0
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        nonlocal fsyncs
        time.sleep(0.02)  # a slow disk: workers queue up behind the write under way
        real_fsync(fd)
        fsyncs += 1
        for journal in tmp_path.glob("journal-*.jsonl"):
            lines = journal.read_text(encoding="utf-8").splitlines()
            synced.update(json.loads(line)["key"] for line in lines)

    monkeypatch.setattr(ledger_store.os, "fsync", slow_fsync)
    client = CountingClient()
    unsynced: list[str] = []

    def put(i: int) -> None:
        req = request(f"q{i}")
        ledger.put(f"k{i}", kind="answer", client="c", request=req, completion=client.complete(req))
        if f"k{i}" not in synced:
            unsynced.append(f"k{i}")

    in_parallel(put, 16)
    assert unsynced == []  # no put returned before its line was fsync'd
    assert fsyncs < 16  # lines queued during an fsync went to disk together
    assert len(Ledger(tmp_path)) == 16


def test_a_failed_journal_write_fails_every_put_of_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.ledger_store as ledger_store
    from tokenlens.ledger_store import LedgerError

    ledger = Ledger(tmp_path)

    def broken_fsync(fd: int) -> None:
        time.sleep(0.02)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(ledger_store.os, "fsync", broken_fsync)
    failures: list[BaseException] = []
    client = CountingClient()

    def put(i: int) -> None:
        req = request(f"q{i}")
        try:
            ledger.put(
                f"k{i}", kind="answer", client="c", request=req, completion=client.complete(req)
            )
        except LedgerError as exc:
            failures.append(exc)

    in_parallel(put, 6)
    assert len(failures) == 6 and all("Input/output error" in str(e) for e in failures)
    assert len(ledger) == 0  # nothing unsynced is served as paid


def test_compaction_keeps_what_it_wrote_instead_of_parsing_its_own_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.ledger_store as ledger_store

    crashed = Ledger(tmp_path)  # another writer's journal, never compacted
    client = CountingClient()
    req = request("theirs")
    crashed.put("theirs", kind="answer", client="c", request=req, completion=client.complete(req))
    ledger = Ledger(tmp_path)
    for i in range(3):
        req = request(f"q{i}")
        ledger.put(f"k{i}", kind="answer", client="c", request=req, completion=client.complete(req))
    parsed: list[Path] = []
    real_read = ledger_store._read_journal

    def read_journal(path: Path) -> Iterator[ledger_store.CallRecord]:
        parsed.append(path)
        return real_read(path)

    monkeypatch.setattr(ledger_store, "_read_journal", read_journal)
    table = pq.read_table(ledger.compact())
    assert sorted(table.column("key").to_pylist()) == ["k0", "k1", "k2", "theirs"]
    assert len(parsed) == 1 and parsed[0] != ledger._store._journal  # type: ignore[attr-defined]
    assert not list(tmp_path.glob("journal-*.jsonl"))
    # Calls stored after a compaction go to a fresh journal, and into the next table.
    req = request("after")
    ledger.put("after", kind="answer", client="c", request=req, completion=client.complete(req))
    ledger.compact()
    assert len(Ledger(tmp_path)) == 5 and not list(tmp_path.glob("journal-*.jsonl"))


def test_after_a_failed_journal_write_compaction_reads_the_journal_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails after its line reached the file: the line is on disk though its
    put failed, so compaction can only learn what the journal holds by reading it."""
    import tokenlens.ledger_store as ledger_store
    from tokenlens.ledger_store import LedgerError

    ledger = Ledger(tmp_path)
    client = CountingClient()
    req = request("ok")
    ledger.put("ok", kind="answer", client="c", request=req, completion=client.complete(req))
    real_fsync = ledger_store.os.fsync

    def broken_fsync(fd: int) -> None:
        real_fsync(fd)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(ledger_store.os, "fsync", broken_fsync)
    req = request("torn")
    with pytest.raises(LedgerError):
        ledger.put("torn", kind="answer", client="c", request=req, completion=client.complete(req))
    monkeypatch.setattr(ledger_store.os, "fsync", real_fsync)
    assert "torn" not in ledger
    table = pq.read_table(ledger.compact())
    assert sorted(table.column("key").to_pylist()) == ["ok", "torn"]  # nothing paid is lost


def test_compaction_with_no_journal_left_leaves_the_table_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun that paid nothing: every record is already in the table, which compaction
    used to parse and rewrite all the same."""
    import tokenlens.ledger_store as ledger_store

    ledger = Ledger(tmp_path)
    _paid(ledger, 2)
    path = ledger.compact()
    written = (tmp_path / "calls.parquet").stat()

    def no_rewrite(records: object) -> bytes:
        raise AssertionError("the table was rewritten")

    monkeypatch.setattr(ledger_store, "table_bytes", no_rewrite)
    rerun = Ledger(tmp_path)
    assert rerun.compact() == path
    assert (tmp_path / "calls.parquet").stat().st_mtime_ns == written.st_mtime_ns
    assert len(Ledger(tmp_path)) == 2

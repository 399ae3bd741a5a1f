"""The ledger on an object store: moto's S3 server on loopback, several processes at once.

What must hold (issue 16): a call recorded by one worker is seen by every other worker
before it pays again; where two race, both answers are kept and one is used; a killed
writer loses at most its calls in flight; compaction never loses a concurrent record.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs

from tokenlens.ledger import Ledger, LedgerClient
from tokenlens.storage import location
from tokenlens.tables import CALLS
from tokenlens.testing.ledger_workers import (
    FakeClient,
    compact_until,
    key_for,
    record_keys,
    request_for,
)
from tokenlens.testing.loopback_s3 import loopback_s3, new_bucket

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with loopback_s3() as endpoint:
        yield endpoint


@pytest.fixture
def s3_root(s3_endpoint: str) -> str:
    """A ledger URL in a fresh bucket."""
    return f"s3://{new_bucket()}/store/ledger"


def objects(root: str, folder: str) -> list[str]:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    try:
        return sorted(str(p) for p in fs.ls(f"{root[len('s3://') :]}/{folder}"))
    except FileNotFoundError:
        return []


def final_rows(root: str) -> list[dict[str, Any]]:
    """Rows of the compacted table(s) after one last compaction."""
    Ledger(root).compact()
    store = location(root)
    rows: list[dict[str, Any]] = []
    for segment in store.child("segments").files(".parquet"):
        table = pq.read_table(pa.BufferReader(segment.read_bytes()))
        assert table.schema.remove_metadata().equals(CALLS)
        rows.extend(table.to_pylist())
    return rows


def put(ledger: Ledger, index: int, worker: str = "w") -> str:
    req = request_for(index)
    completion = FakeClient(worker).complete(req)
    used = ledger.put(key_for(index), kind="answer", client="c", request=req, completion=completion)
    return used.text


def test_the_ledger_round_trips_on_s3(s3_root: str) -> None:
    ledger = Ledger(s3_root)
    texts = {i: put(ledger, i) for i in range(3)}
    assert len(objects(s3_root, "calls")) == 3
    again = Ledger(s3_root)  # a new process's view: no compaction happened
    assert {i: again.get(key_for(i)).text for i in range(3)} == texts  # type: ignore[union-attr]
    assert again.compact().startswith(s3_root)
    assert objects(s3_root, "calls") == []
    assert len(objects(s3_root, "segments")) == 1
    reread = Ledger(s3_root)
    assert len(reread) == 3
    assert reread.get(key_for(1)) == ledger.get(key_for(1))
    assert sorted(r["key"] for r in final_rows(s3_root)) == sorted(key_for(i) for i in range(3))


def test_a_call_recorded_elsewhere_is_seen_before_paying(s3_root: str) -> None:
    early = LedgerClient(FakeClient("early"), Ledger(s3_root))
    late_view = Ledger(s3_root)  # opened before anything was recorded
    compacted_view = Ledger(s3_root)
    early.complete(request_for(1))
    early.complete(request_for(2))
    assert late_view.peek(key_for(1)) is None  # no storage I/O: the view as opened
    late = LedgerClient(FakeClient("late"), late_view)
    assert late.complete(request_for(1)).text == "early answered question 1"
    Ledger(s3_root).compact()  # call objects now gone, their records in a segment
    other = LedgerClient(FakeClient("other"), compacted_view)
    assert other.complete(request_for(2)).text == "early answered question 2"
    assert late.inner.calls == 0 and other.inner.calls == 0  # type: ignore[attr-defined]


def test_two_workers_racing_for_one_key_keep_both_answers_and_use_one(s3_root: str) -> None:
    first, second = Ledger(s3_root), Ledger(s3_root)  # both miss the key, both pay
    assert put(first, 7, "first") == "first answered question 7"
    assert put(second, 7, "second") == "first answered question 7"
    assert (first.written, second.written) == (1, 0)
    [duplicate] = objects(s3_root, "duplicates")
    assert "second answered" in location(f"s3://{duplicate}").read_bytes().decode()
    assert [r["text"] for r in final_rows(s3_root)] == ["first answered question 7"]


@pytest.mark.parametrize("where", ["local", "s3"])
def test_concurrent_writers_and_compaction_keep_every_record_once(
    where: str, s3_root: str, tmp_path: Path
) -> None:
    root = s3_root if where == "s3" else str(tmp_path / "ledger")
    # Four writers, 40 cells each, overlapping (every cell is wanted by two writers), and
    # two compactors running all along.
    plans = {f"w{n}": [(n * 20 + i) % 80 for i in range(40)] for n in range(4)}
    stop = SPAWN.Event()
    compactors = [SPAWN.Process(target=compact_until, args=(root, stop)) for _ in range(2)]
    writers = [
        SPAWN.Process(target=record_keys, args=(root, worker, indices))
        for worker, indices in plans.items()
    ]
    for process in compactors:
        process.start()
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=240)
        assert process.exitcode == 0
    stop.set()
    for process in compactors:
        process.join(timeout=120)
        assert process.exitcode == 0
    local_rows = pq.read_table(Ledger(root).compact()).to_pylist() if where == "local" else []
    rows = final_rows(root) if where == "s3" else local_rows
    keys = [row["key"] for row in rows]
    assert len(keys) == len(set(keys))  # exactly once
    assert set(keys) == {key_for(i) for i in range(80)}  # none lost
    for row in rows:  # each key holds an answer to its own question
        assert row["text"].endswith(f"question {json.loads(row['request_json'])['seed']}")


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_killed_writer_loses_at_most_its_call_in_flight(
    where: str, s3_root: str, tmp_path: Path
) -> None:
    root = s3_root if where == "s3" else str(tmp_path / "ledger")
    acks = SPAWN.Queue()
    writer = SPAWN.Process(target=record_keys, args=(root, "doomed", list(range(200)), acks, 0.02))
    writer.start()
    acknowledged: list[int] = []
    while len(acknowledged) < 15:
        try:
            _, index, _ = acks.get(timeout=120)
        except queue.Empty:  # pragma: no cover - a hung writer
            writer.kill()
            pytest.fail("the writer acknowledged no call for 120 s")
        acknowledged.append(index)
    assert writer.pid is not None
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(timeout=30)
    assert writer.exitcode == -signal.SIGKILL
    while True:  # acknowledgements already queued before the kill
        try:
            acknowledged.append(acks.get(timeout=1)[1])
        except queue.Empty:
            break
    survivor = Ledger(root)
    stored = {i for i in range(200) if key_for(i) in survivor}
    assert set(acknowledged) <= stored  # nothing acknowledged was lost
    assert len(stored - set(acknowledged)) <= 1  # at most the one call in flight extra
    assert stored == set(range(len(stored)))  # and nothing beyond it, no gaps

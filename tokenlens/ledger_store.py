"""Where the call ledger's records live: a local journal folder or an object store.

`Ledger` (in `tokenlens.ledger`) keeps the in-memory index and the public API; this module
only stores records, in one of two layouts chosen by the ledger's location:

Local disk (`JournalStore`, the default; unchanged layout)::

    calls.parquet          compacted calls
    journal-<pid>-*.jsonl  one append-only journal per process, fsync'd per call
    ledger.lock            flock held by compaction

Object store (`ObjectStore`, e.g. ``s3://bucket/prefix/ledger``), which has neither
append nor locks::

    calls/<key>.json               one immutable object per paid call, created with
                                   If-None-Match: * (exactly one creator wins a key)
    segments/calls-<id>.parquet    compacted calls; immutable, written before any
                                   object they replace is deleted
    duplicates/<key>-<id>.json     a call two workers paid for in the same window: the
                                   loser's answer, kept (it was paid) but never used

Both layouts keep the calls sent and not yet answered (`IntentStore`)::

    intents/<run>/<key>-<id>.json  created before a paid call is sent, removed once its
                                   answer is stored or it failed; one left after the
                                   run's attempts ended was in flight at a kill

Object-store invariants, which make compaction safe with any number of concurrent
writers and compactors (no lock anywhere):

1. A record, once created, is in at least one existing object at every later moment:
   compaction writes its new segment first and deletes only objects it has fully read.
2. A reader lists ``calls/`` before ``segments/``, and relists segments when one it
   listed has vanished (a compaction replaced it by a superset written earlier).
3. A miss is re-checked against the store before paying: GET ``calls/<key>.json``, then
   a fresh listing of ``segments/``. So a call recorded by any worker before that check
   is never paid again; two workers that both miss within one call's duration both pay,
   the first create wins, and the second keeps its answer under ``duplicates/`` and
   uses the winner's.

The two layouts implement one small interface side by side, because their durability
arguments (above) read best next to each other; the record and its encodings, which both
share, are `tokenlens.ledger_records`'.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tokenlens.ledger_records import (
    CallRecord,
    Intent,
    LedgerError,
    decode_record,
    read_table,
    records_of_table,
    table_bytes,
)
from tokenlens.processes import process_alive
from tokenlens.storage import Location, StorageError, unique_name

log = logging.getLogger(__name__)

CALLS_FILE = "calls.parquet"
_JOURNAL_PREFIX = "journal-"
_JOURNAL_SUFFIX = ".jsonl"
_SEGMENT_RETRIES = 20


class RecordStore(Protocol):
    """What `Ledger` needs from a storage layout."""

    where: str  # the compacted table's location, for messages and artifacts

    def load(self) -> Iterable[CallRecord]:
        """Every record stored so far."""

    def lookup(self, key: str) -> Iterable[CallRecord]:
        """A fresh look in the store after an index miss (records found, maybe others too)."""

    def append(self, record: CallRecord) -> CallRecord:
        """Store durably; returns the record to use (another writer's, if it won the key)."""

    def compact(self, known: dict[str, CallRecord]) -> dict[str, CallRecord]:
        """Fold pending records into the compacted table; returns every record."""


def open_store(root: Location) -> RecordStore:
    return JournalStore(root) if root.local else ObjectStore(root)


class IntentStore:
    """Calls sent and not answered yet: one small object per call, created (through
    `Location.create`, durable on either layout) before the call is sent and removed
    once it ended. A kill leaves its calls in flight here, so a later attempt of the run
    can say exactly how many requests the upstream may have billed without the ledger
    holding their answers, instead of bounding them by the concurrency."""

    def __init__(self, root: Location):
        self.root = root.child("intents")

    def open(self, intent: Intent) -> Location:
        where = self.root.child(intent.run, unique_name(f"{intent.key}-", ".json"))
        try:
            where.create(intent.encode())
        except StorageError as exc:
            raise LedgerError(f"{where.url}: cannot store a call's intent ({exc})") from exc
        return where

    def close(self, where: Location) -> None:
        try:
            where.remove()
        except StorageError as exc:
            raise LedgerError(f"{where.url}: cannot remove a call's intent ({exc})") from exc

    def left(self, run: str) -> int:
        """Intents of `run` still open: its calls in flight now, or at a kill."""
        return len(self.root.child(run).files(".json"))


# -- local disk --------------------------------------------------------------------


@dataclass
class _Batch:
    """Journal lines that one write and one fsync make durable together."""

    lines: list[str]
    records: list[CallRecord]
    done: bool = False
    error: BaseException | None = None


class JournalStore:
    """Per-process JSONL journals, fsync'd per call; flock'd compaction into Parquet.

    Several processes may share the folder: each writes its own journal, and compaction
    only removes journals of processes that are gone. A miss is not re-checked on disk
    (one machine's workers share one process in the default path).

    Group commit: an append returns only once its line is fsync'd, but the lines workers
    append while an fsync is under way go to disk together in the next one. A stage's
    workers finish their calls at nearly the same moment (same latency), and one fsync
    each in turn (~6 ms on a small VM) kept the last of 8 waiting ~50 ms per wave.

    Compaction does not parse back the journal this instance wrote: it keeps the records
    of every line it fsync'd (`_written`) until the table holding them replaces the
    journal. Parsing them again cost ~0.2 s of CPU per 300 calls at the end of every paid
    stage. After a failed write (the file may hold lines nobody knows of) it reads the
    journal as it reads the others.
    """

    def __init__(self, root: Location):
        self.root = Path(root.path)
        self.root.mkdir(parents=True, exist_ok=True)
        self._table = root.child(CALLS_FILE)
        self.where = self._table.url
        self._journal = self.root / f"{_JOURNAL_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self._lock = threading.Lock()  # one writer of our journal at a time
        self._batching = threading.Condition()  # guards the two fields below
        self._open: _Batch | None = None  # lines waiting for the next write
        self._writing = False
        # What our journal holds, guarded by `_lock`: the records of its fsync'd lines,
        # or None once a write failed (then only reading the file says what it holds).
        self._written: list[CallRecord] | None = []

    def _journals(self) -> list[Path]:
        return sorted(self.root.glob(f"{_JOURNAL_PREFIX}*{_JOURNAL_SUFFIX}"))

    def load(self) -> Iterator[CallRecord]:
        # Journals before the table: a journal that vanishes meanwhile was compacted into
        # a table written before its removal, which is the one read next.
        for journal in self._journals():
            yield from _read_journal(journal)
        if self._table.exists():
            yield from read_table(self._table)

    def lookup(self, key: str) -> list[CallRecord]:
        return []

    def append(self, record: CallRecord) -> CallRecord:
        line = record.encode().decode("utf-8") + "\n"
        with self._batching:
            if self._open is None:
                self._open = _Batch([], [])
            batch = self._open
            batch.lines.append(line)
            batch.records.append(record)
            while not batch.done:
                if self._writing:  # ours is in that write, or waits for the next one
                    self._batching.wait()
                    continue
                assert self._open is batch  # neither written nor being written: open
                self._write(batch)  # ours, and every line queued with it
        if batch.error is not None:
            raise LedgerError(
                f"{self._journal}: cannot append call ({batch.error})"
            ) from batch.error
        return record

    def _write(self, batch: _Batch) -> None:
        """Write and fsync the open batch; called holding `_batching`, which it releases
        during the I/O so other workers can queue their lines meanwhile. A failure is
        every line's failure: each appender of the batch raises it."""
        self._open, self._writing = None, True
        self._batching.release()
        error: BaseException | None = None
        try:
            # Opened per write (no handle outlives it), appended, fsync'd.
            with self._lock:
                try:
                    with open(self._journal, "a", encoding="utf-8") as journal:
                        journal.write("".join(batch.lines))
                        journal.flush()
                        os.fsync(journal.fileno())
                except BaseException:
                    self._written = None  # some of the lines may be in the file
                    raise
                if self._written is not None:
                    self._written.extend(batch.records)
        except BaseException as exc:
            error = exc
            if not isinstance(exc, Exception):
                raise  # an interrupt: the others of the batch see a failed append
        finally:
            self._batching.acquire()
            batch.done, batch.error, self._writing = True, error, False
            self._batching.notify_all()

    def compact(self, known: dict[str, CallRecord]) -> dict[str, CallRecord]:
        """Fold every journal into the table; returns every record (or, when there was
        nothing to fold, `known`: the table already holds everything durable)."""
        with _file_lock(self.root / "ledger.lock"), self._lock:
            journals = self._journals()
            if not journals and self._table.exists():
                # A compactor writes the table before removing the journals it read, so
                # with no journal left the table holds every record ever stored here.
                return known
            merged: dict[str, CallRecord] = {}
            if self._table.exists():
                merged.update((r.key, r) for r in read_table(self._table))
            # Decided before reading: a journal whose owner is gone can no longer grow,
            # while a live owner may append after we read (then exit before we check).
            done = [j for j in journals if j == self._journal or not _owner_alive(j)]
            for journal in journals:
                if journal == self._journal and self._written is not None:
                    records: Iterable[CallRecord] = self._written  # our own: no parsing
                else:
                    records = _read_journal(journal)
                for record in records:
                    merged.setdefault(record.key, record)
            for key, record in known.items():
                merged.setdefault(key, record)
            self._table.write_bytes(table_bytes(merged.values()))
            for journal in done:
                journal.unlink(missing_ok=True)
            if self._journal in done:
                self._written = []  # the table holds them; the journal starts afresh
        return merged


def _owner_alive(journal: Path) -> bool:
    """Whether the process that owns a journal (pid in its name) still runs here."""
    try:
        pid = int(journal.name.split("-")[1])
    except (IndexError, ValueError):
        return False
    return pid != os.getpid() and process_alive(pid)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_journal(path: Path) -> Iterator[CallRecord]:
    """Records of a journal; a torn last line (a kill mid-write) is skipped, not fatal."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return  # compacted away by another process since it was listed
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read journal ({exc})") from exc
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield CallRecord.from_json(json.loads(line))
        except (ValueError, KeyError) as exc:
            if lineno == len(lines):
                log.warning("%s:%d: skipping torn last line (%s)", path, lineno, exc)
                continue
            raise LedgerError(f"{path}:{lineno}: corrupt journal line ({exc})") from exc


# -- object store ------------------------------------------------------------------


class ObjectStore:
    """One immutable object per call, created conditionally; lock-free compaction.

    See the module docstring for the layout and the invariants this class keeps.
    """

    def __init__(self, root: Location):
        self.calls = root.child("calls")
        self.segments = root.child("segments")
        self.duplicates = root.child("duplicates")
        self.where = self.segments.url
        self._seen: set[str] = set()  # segments already read into the caller's index
        self._lock = threading.Lock()

    def _call_object(self, key: str) -> Location:
        return self.calls.child(f"{key}.json")

    def load(self) -> list[CallRecord]:
        records = [decode_record(loc, raw) for loc, raw in self._read(self.calls.files(".json"))]
        return self._new_segment_records() + records

    def lookup(self, key: str) -> list[CallRecord]:
        target = self._call_object(key)
        try:
            return [decode_record(target, target.read_bytes())]
        except FileNotFoundError:
            return self._new_segment_records()

    def append(self, record: CallRecord) -> CallRecord:
        data = record.encode()
        target = self._call_object(record.key)
        try:
            if target.create(data):
                return record
            # Another worker paid for this key in the same window and won the create.
            self.duplicates.child(unique_name(f"{record.key}-", ".json")).create(data)
        except StorageError as exc:
            raise LedgerError(f"{target.url}: cannot store call ({exc})") from exc
        log.warning("call %s was paid twice (concurrent workers); using the first", record.key)
        for found in self.lookup(record.key):
            if found.key == record.key:
                return found
        return record

    def compact(self, known: dict[str, CallRecord]) -> dict[str, CallRecord]:
        segments = self.segments.files(".parquet")
        calls = self.calls.files(".json")
        merged: dict[str, CallRecord] = {}
        read_segments = []
        for loc, raw in self._read(segments):
            read_segments.append(loc)
            for record in records_of_table(loc, raw):
                merged.setdefault(record.key, record)
        read_calls = []
        for loc, raw in self._read(calls):
            record = decode_record(loc, raw)
            kept = merged.setdefault(record.key, record)
            if kept is not record and (kept.created, kept.completion) != (
                record.created,
                record.completion,
            ):
                # Re-created after an earlier compaction by a worker that raced it.
                self.duplicates.child(unique_name(f"{record.key}-", ".json")).create(raw)
            read_calls.append(loc)
        missing = [record for key, record in known.items() if key not in merged]
        if not read_calls and len(read_segments) == 1 and not missing:
            with self._lock:
                self._seen.add(read_segments[0].path)
            return merged  # already one segment holding everything: nothing to rewrite
        for record in missing:
            merged[record.key] = record
        fresh = self.segments.child(unique_name("calls-", ".parquet"))
        if not fresh.create(table_bytes(merged.values())):
            raise LedgerError(f"{fresh.url}: segment name already taken")
        # Only now, with every record read safely in `fresh`, remove what it replaces.
        self.calls.remove_many(read_calls)
        self.segments.remove_many(read_segments)
        with self._lock:
            self._seen = {fresh.path}
        return merged

    def _new_segment_records(self) -> list[CallRecord]:
        """Records of segments this instance has not read yet (relisting if one vanished)."""
        for _ in range(_SEGMENT_RETRIES):
            listed = self.segments.files(".parquet")
            with self._lock:
                unseen = [loc for loc in listed if loc.path not in self._seen]
            contents = dict(self._read(unseen))
            if len(contents) < len(unseen):
                continue  # a compaction replaced one of them: its superset is listed now
            records = [r for loc, raw in contents.items() for r in records_of_table(loc, raw)]
            with self._lock:
                self._seen.update(loc.path for loc in unseen)
            return records
        raise LedgerError(f"{self.segments.url}: segments kept vanishing while being read")

    def _read(self, locations: list[Location]) -> list[tuple[Location, bytes]]:
        if not locations:
            return []
        raw = locations[0].read_many(locations)
        return [(loc, raw[loc.path]) for loc in locations if loc.path in raw]

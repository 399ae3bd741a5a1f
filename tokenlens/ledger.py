"""The call ledger: every paid model call, stored the moment it returns, never paid twice.

Why a journal and not Prefect's result cache: a calibration can be killed at any point
(SIGKILL, a laptop lid, a max-spend stop) and the money already spent must survive. Each
completed call is appended to a per-process JSONL journal and fsync'd before the caller
sees the answer, so a kill loses at most the calls still in flight. At stage end the
journals are compacted into one Parquet table (``calls.parquet``, schema
`tokenlens.tables.CALLS`) and removed. A rerun reads both and only makes missing calls.

A call is keyed by a content hash of everything that determines it (`call_key`): the
client's name, the full request (model, messages, system, max tokens, temperature, seed,
JSON schema) and a salt (the judge prompt's version for judge calls). The replicate and
sample index enter through the request's seed, so repeats never collapse into one answer.

`LedgerClient` wraps any `ModelClient`, so the sampling and judge code never know the
ledger exists. It deduplicates concurrent requests for one key, and consults a
`SpendMeter` before every new call.

This module imports pyarrow only inside `compact` / `load`, and nothing from prefect.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tokenlens.errors import SpendLimitReached, TokenLensError
from tokenlens.models.base import Completion, CompletionRequest, ModelClient, Usage
from tokenlens.models.retry import TruncatedOutputError

log = logging.getLogger(__name__)

#: Bump when the key recipe changes (old entries then simply stop matching).
KEY_VERSION = 1
CALLS_FILE = "calls.parquet"
_JOURNAL_GLOB = "journal-*.jsonl"

CallKind = Literal["answer", "judge"]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_key(client_name: str, request: CompletionRequest, *, salt: str = "") -> str:
    """The content hash that identifies one call (hex sha256).

    Everything that can change the answer is in it; nothing else is (no timestamps, no
    arm names), so two cells that send byte-identical requests share one paid answer.
    """
    material = {
        "v": KEY_VERSION,
        "client": client_name,
        "request": request.model_dump(mode="json"),
        "salt": salt,
    }
    return hashlib.sha256(_canonical(material).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CallRecord:
    """One completed call as the ledger stores it."""

    key: str
    kind: str
    client: str
    salt: str
    request: CompletionRequest
    completion: Completion
    created: str

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "client": self.client,
            "salt": self.salt,
            "request": self.request.model_dump(mode="json"),
            "completion": self.completion.model_dump(mode="json"),
            "created": self.created,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> CallRecord:
        return cls(
            key=raw["key"],
            kind=raw["kind"],
            client=raw["client"],
            salt=raw.get("salt", ""),
            request=CompletionRequest.model_validate(raw["request"]),
            completion=Completion.model_validate(raw["completion"]),
            created=raw["created"],
        )


class LedgerError(TokenLensError):
    """The ledger's files cannot be read or written."""


class Ledger:
    """The append-only store of completed calls under one directory.

    Thread-safe: one lock guards the journal handle and the in-memory index. Several
    processes may share a directory; each writes its own journal, and compaction holds an
    exclusive file lock and only removes journals of processes that are gone.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._records: dict[str, CallRecord] = {}
        self._journal_path = self.root / f"journal-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self.written = 0  # calls appended by this instance
        self._load()

    # -- reading -----------------------------------------------------------------

    @property
    def calls_path(self) -> Path:
        return self.root / CALLS_FILE

    def _load(self) -> None:
        if self.calls_path.exists():
            for record in _read_parquet(self.calls_path):
                self._records[record.key] = record
        for journal in sorted(self.root.glob(_JOURNAL_GLOB)):
            for record in _read_journal(journal):
                self._records.setdefault(record.key, record)

    def get(self, key: str) -> Completion | None:
        with self._lock:
            record = self._records.get(key)
        return record.completion if record else None

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._records

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records.values())

    # -- writing -----------------------------------------------------------------

    def put(
        self,
        key: str,
        *,
        kind: str,
        client: str,
        request: CompletionRequest,
        completion: Completion,
        salt: str = "",
    ) -> None:
        """Append one completed call and fsync it before returning."""
        record = CallRecord(
            key=key,
            kind=kind,
            client=client,
            salt=salt,
            request=request,
            completion=completion,
            created=datetime.now(UTC).isoformat(),
        )
        line = _canonical(record.to_json()) + "\n"
        with self._lock:
            if key in self._records:
                return
            try:
                # Opened per call (no handle outlives the write), appended, fsync'd.
                with open(self._journal_path, "a", encoding="utf-8") as journal:
                    journal.write(line)
                    journal.flush()
                    os.fsync(journal.fileno())
            except OSError as exc:
                raise LedgerError(f"{self._journal_path}: cannot append call ({exc})") from exc
            self._records[key] = record
            self.written += 1

    def compact(self) -> Path:
        """Fold every journal into ``calls.parquet`` (atomically) and remove merged journals.

        Journals of other live processes are merged but kept (their owner is still
        appending); duplicates are harmless because records are keyed.
        """
        with _file_lock(self.root / "ledger.lock"), self._lock:
            merged: dict[str, CallRecord] = {}
            if self.calls_path.exists():
                merged.update((r.key, r) for r in _read_parquet(self.calls_path))
            journals = sorted(self.root.glob(_JOURNAL_GLOB))
            for journal in journals:
                for record in _read_journal(journal):
                    merged.setdefault(record.key, record)
            for key, record in self._records.items():
                merged.setdefault(key, record)
            _write_parquet(self.calls_path, list(merged.values()))
            for journal in journals:
                if journal == self._journal_path or not _owner_alive(journal):
                    journal.unlink(missing_ok=True)
            self._records = merged
        return self.calls_path


def _owner_alive(journal: Path) -> bool:
    """Whether the process that owns a journal (pid in its name) still runs here."""
    try:
        pid = int(journal.name.split("-")[1])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def _read_parquet(path: Path) -> Iterator[CallRecord]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise LedgerError(f"{path}: cannot read call table ({exc})") from exc
    for row in table.to_pylist():
        usage = Usage(
            input_tokens=row["input_tokens"] or 0,
            output_tokens=row["output_tokens"] or 0,
            cache_read_tokens=row["cache_read_tokens"] or 0,
            cache_write_tokens=row["cache_write_tokens"] or 0,
        )
        completion = Completion(
            text=row["text"],
            parsed=json.loads(row["parsed_json"]) if row["parsed_json"] else None,
            usage=usage,
            model=row["response_model"],
            stop_reason=row["stop_reason"],
            latency_s=row["latency_s"] or 0.0,
            cost_usd=row["cost_usd"],
            backend=row["backend"] or "",
        )
        yield CallRecord(
            key=row["key"],
            kind=row["kind"],
            client=row["client"],
            salt=row["salt"] or "",
            request=CompletionRequest.model_validate_json(row["request_json"]),
            completion=completion,
            created=row["created"],
        )


def _write_parquet(path: Path, records: list[CallRecord]) -> None:
    import pyarrow as pa

    from tokenlens.calibration.store import write_parquet_atomic
    from tokenlens.tables import CALLS

    rows = [
        {
            "key": r.key,
            "kind": r.kind,
            "client": r.client,
            "salt": r.salt,
            "model": r.request.model,
            "request_json": r.request.model_dump_json(),
            "text": r.completion.text,
            "parsed_json": _canonical(r.completion.parsed)
            if r.completion.parsed is not None
            else None,
            "response_model": r.completion.model,
            "stop_reason": r.completion.stop_reason,
            "input_tokens": r.completion.usage.input_tokens,
            "output_tokens": r.completion.usage.output_tokens,
            "cache_read_tokens": r.completion.usage.cache_read_tokens,
            "cache_write_tokens": r.completion.usage.cache_write_tokens,
            "cost_usd": r.completion.cost_usd,
            "latency_s": r.completion.latency_s,
            "backend": r.completion.backend,
            "created": r.created,
        }
        for r in sorted(records, key=lambda rec: (rec.created, rec.key))
    ]
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=CALLS), path)


def _replay(completion: Completion, request: CompletionRequest) -> Completion:
    """Return a stored completion the way the backend did: a cut-off answer raises."""
    if completion.stop_reason == "max_tokens" and request.json_schema is None:
        raise TruncatedOutputError(
            f"answer was cut off at max_tokens={request.max_tokens} "
            f"({completion.usage.output_tokens} output tokens)",
            completion,
        )
    return completion


class SpendMeter:
    """New spend of this run, against an optional cap. Thread-safe.

    Cached calls cost nothing. A call whose price is unknown (local model, a model missing
    from the pricing table) counts as unpriced, never as a silent $0 estimate.
    """

    def __init__(self, max_spend: float | None = None):
        self.max_spend = max_spend
        self._lock = threading.Lock()
        self.spent = 0.0
        self.new_calls = 0
        self.unpriced_calls = 0
        self.refused = 0

    def check(self) -> None:
        """Raise SpendLimitReached when the cap is reached (before a new call is made)."""
        with self._lock:
            if self.max_spend is not None and self.spent >= self.max_spend:
                self.refused += 1
                raise SpendLimitReached(
                    f"max spend ${self.max_spend:.2f} reached (${self.spent:.4f} spent this run)"
                )

    def add(self, completion: Completion) -> None:
        with self._lock:
            self.new_calls += 1
            if completion.cost_usd is None:
                self.unpriced_calls += 1
            else:
                self.spent += completion.cost_usd

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return self.max_spend is not None and self.spent >= self.max_spend


@dataclass
class LedgerStats:
    """What a `LedgerClient` did: hits, new calls, failures."""

    cached: int = 0
    new: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


class LedgerClient:
    """A `ModelClient` that answers from the ledger when it can and records what it pays for.

    Args:
        client: the real backend.
        ledger: where completed calls live.
        kind: "answer" or "judge" (stored with the record, for the reader's benefit).
        salt: extra key material, e.g. ``judge-prompt:v3`` so a new judge prompt re-judges.
        spend: the run's spend meter; checked before every new call.
        on_call: called after each call with (cached, completion) for progress display.
    """

    def __init__(
        self,
        client: ModelClient,
        ledger: Ledger,
        *,
        kind: CallKind = "answer",
        salt: str = "",
        spend: SpendMeter | None = None,
        on_call: Callable[[bool, Completion], None] | None = None,
    ):
        self.inner = client
        self.name = client.name
        self.ledger = ledger
        self.kind = kind
        self.salt = salt
        self.spend = spend or SpendMeter()
        self.on_call = on_call
        self.stats = LedgerStats()
        self._inflight: dict[str, Future[Completion]] = {}
        self._inflight_lock = threading.Lock()

    def key(self, request: CompletionRequest) -> str:
        return call_key(self.name, request, salt=self.salt)

    def cached(self, request: CompletionRequest) -> Completion | None:
        """The stored answer of a request, or None (never makes a call)."""
        return self.ledger.get(self.key(request))

    def complete(self, request: CompletionRequest) -> Completion:
        key = self.key(request)
        hit = self.ledger.get(key)
        if hit is not None:
            self.stats.bump("cached")
            self._notify(True, hit)
            return _replay(hit, request)
        with self._inflight_lock:
            pending = self._inflight.get(key)
            owner = pending is None
            if owner:
                pending = Future()
                self._inflight[key] = pending
        assert pending is not None
        if not owner:
            completion = pending.result()
            self.stats.bump("cached")
            self._notify(True, completion)
            return _replay(completion, request)
        try:
            completion = self._call(key, request)
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        else:
            pending.set_result(completion)
            return _replay(completion, request)
        finally:
            with self._inflight_lock:
                self._inflight.pop(key, None)

    def _call(self, key: str, request: CompletionRequest) -> Completion:
        self.spend.check()
        try:
            completion = self.inner.complete(request)
        except TruncatedOutputError as exc:
            # Cut off at max_tokens, but paid for: store it, so a rerun does not pay again.
            if not isinstance(exc.completion, Completion):
                raise
            completion = exc.completion
        except Exception:
            self.stats.bump("failed")
            raise
        self._store(key, request, completion)
        return completion

    def record(self, request: CompletionRequest, completion: Completion) -> None:
        """Store a completion obtained another way (e.g. from a message batch)."""
        self._store(self.key(request), request, completion)

    def _store(self, key: str, request: CompletionRequest, completion: Completion) -> None:
        """Journal a paid call durably, count its spend, and tell the progress listener."""
        self.ledger.put(
            key,
            kind=self.kind,
            client=self.name,
            request=request,
            completion=completion,
            salt=self.salt,
        )
        self.spend.add(completion)
        self.stats.bump("new")
        self._notify(False, completion)

    def _notify(self, cached: bool, completion: Completion) -> None:
        if self.on_call is not None:
            self.on_call(cached, completion)

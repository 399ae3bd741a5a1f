"""The call ledger: every paid model call, stored the moment it returns, never paid twice.

Why a durable ledger and not Prefect's result cache: a calibration can be killed at any
point (SIGKILL, a laptop lid, a max-spend stop) and the money already spent must survive.
Each completed call is stored durably before the caller sees the answer, so a kill loses
at most the calls still in flight. At stage end pending records are compacted into
Parquet (schema `tokenlens.tables.CALLS`). A rerun reads everything and only makes
missing calls. Where and how records are stored is `tokenlens.ledger_store`'s job: a
local folder (per-process fsync'd JSONL journals, the default) or an object store URL
such as ``s3://bucket/prefix/ledger`` (one conditionally created object per call), safe
with many workers writing at once.

A call is keyed by a content hash of everything that determines it (`call_key`): the
client's name, the full request (model, messages, system, max tokens, temperature, seed,
JSON schema) and a salt (the judge prompt's version for judge calls). The replicate and
sample index enter through the request's seed, so repeats never collapse into one answer.

`LedgerClient` wraps any `ModelClient`, so the sampling and judge code never know the
ledger exists. It deduplicates concurrent requests for one key, and consults a
`SpendMeter` before every new call.

This module and `tokenlens.ledger_store` import pyarrow only when reading or writing
Parquet, and nothing from prefect.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from tokenlens.errors import SpendLimitReached
from tokenlens.ledger_records import CallRecord, Intent, LedgerError, canonical
from tokenlens.ledger_store import CALLS_FILE, IntentStore, open_store
from tokenlens.models.base import Completion, CompletionRequest, ModelClient
from tokenlens.models.retry import TruncatedOutputError
from tokenlens.storage import Location, location

__all__ = [
    "CALLS_FILE",
    "CallRecord",
    "Ledger",
    "LedgerClient",
    "LedgerError",
    "SpendMeter",
    "call_key",
]

log = logging.getLogger(__name__)

#: Bump when the key recipe changes (old entries then simply stop matching).
KEY_VERSION = 1

CallKind = Literal["answer", "judge"]


def call_key(client_name: str, request: CompletionRequest, *, salt: str = "") -> str:
    """The content hash that identifies one call (hex sha256).

    Everything that can change the answer is in it; nothing else is (no timestamps, no
    arm names), so two cells that send byte-identical requests share one paid answer.
    """
    material = {
        "v": KEY_VERSION,
        "client": client_name,
        "request": request.model_dump(
            mode="json", exclude={"tools"} if request.tools is None else None
        ),
        "salt": salt,
    }
    return hashlib.sha256(canonical(material).encode("utf-8")).hexdigest()


class Ledger:
    """The store of completed calls under one location: a folder or a store URL.

    Thread-safe: one lock guards the in-memory index (storage I/O happens outside it).
    Several processes, on one machine or many, may share a location; see
    `tokenlens.ledger_store` for what each layout guarantees.

    Args:
        root: a local folder (created if missing) or an fsspec URL such as
            ``s3://bucket/prefix/ledger``.
        run: the calibration run this instance pays for; stamped on every call it
            stores, so a run's spend adds up over its attempts and shards (`paid_by`).
        compacts: False for a process that leaves compaction to another (a shard: its
            parent compacts once when every shard is done, instead of every shard
            rewriting the whole shared ledger at the end of each stage).
    """

    def __init__(self, root: str | Path | Location, *, run: str = "", compacts: bool = True):
        self.location = location(root)
        self.root = self.location.url
        self.run = run
        self.compacts = compacts
        self._store = open_store(self.location)
        self._intents = IntentStore(self.location)
        self._open: set[str] = set()  # "<run>/<name>" of the intents this instance holds
        self._lock = threading.Lock()
        self._records: dict[str, CallRecord] = {}
        self.written = 0  # calls stored by this instance
        for record in self._store.load():
            self._records.setdefault(record.key, record)

    # -- reading -----------------------------------------------------------------

    @property
    def calls_path(self) -> str:
        """Where the compacted table lives (a Parquet file, or a folder of segments)."""
        return self._store.where

    def get(self, key: str) -> Completion | None:
        """The stored answer of `key`, looking in the shared store again on a miss.

        The second look is what keeps workers on one object store from paying for a call
        another worker recorded after this ledger was opened.
        """
        with self._lock:
            record = self._records.get(key)
        if record is None:
            found = list(self._store.lookup(key))
            with self._lock:
                for other in found:
                    self._records.setdefault(other.key, other)
                record = self._records.get(key)
        return record.completion if record else None

    def peek(self, key: str) -> Completion | None:
        """The answer this instance already knows, with no storage I/O (for estimates)."""
        with self._lock:
            record = self._records.get(key)
        return record.completion if record else None

    def snapshot(self) -> LedgerView:
        """What this instance knows now, frozen (an estimate made while calls are paid)."""
        with self._lock:
            return LedgerView({key: record.completion for key, record in self._records.items()})

    def __contains__(self, key: object) -> bool:
        """Whether `key` is in this instance's view (no storage I/O; `get` looks again)."""
        with self._lock:
            return key in self._records

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def records(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records.values())

    def paid_by(self, run: str) -> list[CallRecord]:
        """The calls in this instance's view that `run` paid for (any attempt, any shard)."""
        with self._lock:
            return [record for record in self._records.values() if record.run == run]

    def in_flight(self, run: str) -> int:
        """Calls of `run` sent by another process and never answered nor failed: once
        every other attempt and shard of the run has ended, those it was killed with
        (this instance's own calls still under way are left out)."""
        with self._lock:
            mine = sum(1 for where in self._open if where.startswith(f"{run}/"))
        return self._intents.left(run) - mine

    # -- writing -----------------------------------------------------------------

    def intend(self, key: str, kind: str) -> Location | None:
        """Store, before `key` is sent, that it is about to be paid for; None from a
        ledger that pays for no run (no run's spend to report it in)."""
        if not self.run:
            return None
        where = self._intents.open(Intent(key, kind, self.run, datetime.now(UTC).isoformat()))
        with self._lock:
            self._open.add(f"{self.run}/{where.name}")
        return where

    def settle(self, intent: Location | None) -> None:
        """The call of `intent` ended in this process: answered and stored, or failed."""
        if intent is not None:
            self._intents.close(intent)
            with self._lock:
                self._open.discard(f"{self.run}/{intent.name}")

    def put(
        self,
        key: str,
        *,
        kind: str,
        client: str,
        request: CompletionRequest,
        completion: Completion,
        salt: str = "",
    ) -> Completion:
        """Store one completed call durably before returning; returns the answer to use.

        That is `completion` itself, unless the key was already stored (by this process or,
        in a race, by another worker): then the stored answer, so every user of a key sees
        one answer.
        """
        with self._lock:
            known = self._records.get(key)
        if known is not None:
            return known.completion
        record = CallRecord(
            key=key,
            kind=kind,
            client=client,
            salt=salt,
            request=request,
            completion=completion,
            created=datetime.now(UTC).isoformat(),
            run=self.run,
        )
        stored = self._store.append(record)
        with self._lock:
            kept = self._records.setdefault(key, stored)
            if kept is record:
                self.written += 1
        return kept.completion

    def compact(self) -> str:
        """Fold pending records into the compacted table; returns where that table is.

        Safe while other processes or workers keep writing: a record stored concurrently
        is either in the new table or still pending, never lost. A no-op on an instance
        opened with `compacts=False`.
        """
        if not self.compacts:
            return self._store.where
        with self._lock:
            known = dict(self._records)
        merged = self._store.compact(known)
        with self._lock:
            for key, record in merged.items():
                self._records.setdefault(key, record)
        return self._store.where


class LedgerView:
    """The calls a ledger held at one moment (`Ledger.snapshot`): membership and answers."""

    def __init__(self, completions: dict[str, Completion]):
        self._completions = completions

    def __contains__(self, key: object) -> bool:
        return key in self._completions

    def peek(self, key: str) -> Completion | None:
        return self._completions.get(key)


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
    """New spend of this attempt of a run, against an optional cap. Thread-safe.

    Cached calls cost nothing. A call whose price is unknown (local model, a model missing
    from the pricing table) counts as unpriced, never as a silent $0 estimate. `carried`
    is what the run's earlier attempts paid (from the ledger): it counts against the cap,
    so a run that crashes and is retried never pays more than `max_spend` in all.
    """

    def __init__(self, max_spend: float | None = None, *, carried: float = 0.0):
        self.max_spend = max_spend
        self.carried = carried
        self._lock = threading.Lock()
        self.spent = 0.0
        self.new_calls = 0
        self.unpriced_calls = 0
        self.refused = 0

    def check(self) -> None:
        """Raise SpendLimitReached when the cap is reached (before a new call is made)."""
        with self._lock:
            if self.max_spend is not None and self.carried + self.spent >= self.max_spend:
                self.refused += 1
                earlier = f", ${self.carried:.4f} before it" if self.carried else ""
                raise SpendLimitReached(
                    f"max spend ${self.max_spend:.2f} reached (${self.spent:.4f} spent by "
                    f"this attempt{earlier})"
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
            return self.max_spend is not None and self.carried + self.spent >= self.max_spend


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
        # Stored before the call is sent and removed once it ended here, so a kill
        # leaves behind exactly the calls it caught in flight (`Ledger.in_flight`).
        intent = self.ledger.intend(key, self.kind)
        try:
            completion = self.inner.complete(request)
        except TruncatedOutputError as exc:
            # Cut off at max_tokens, but paid for: store it, so a rerun does not pay again.
            if not isinstance(exc.completion, Completion):
                self.ledger.settle(intent)
                raise
            completion = exc.completion
        except Exception:
            self.stats.bump("failed")
            self.ledger.settle(intent)
            raise
        used = self._store(key, request, completion)
        self.ledger.settle(intent)
        return used

    def record(self, request: CompletionRequest, completion: Completion) -> None:
        """Store a completion obtained another way (e.g. from a message batch)."""
        self._store(self.key(request), request, completion)

    def _store(self, key: str, request: CompletionRequest, completion: Completion) -> Completion:
        """Store a paid call durably, count its spend, tell the progress listener.

        Returns the answer to use: the stored one, if another worker won the key.
        """
        used = self.ledger.put(
            key,
            kind=self.kind,
            client=self.name,
            request=request,
            completion=completion,
            salt=self.salt,
        )
        self.spend.add(completion)  # paid, whichever answer is used
        self.stats.bump("new")
        self._notify(False, used)
        return used

    def _notify(self, cached: bool, completion: Completion) -> None:
        if self.on_call is not None:
            self.on_call(cached, completion)

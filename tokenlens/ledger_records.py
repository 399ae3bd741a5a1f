"""One call as the ledger stores it, and its two encodings: a JSON line or object per call,
and rows of the compacted Parquet table (schema `tokenlens.tables.CALLS`); and the
intent stored before a call is sent (`Intent`).

Both storage layouts (`tokenlens.ledger_store`) read and write records only through this
module, so a record decodes the same whichever layout it came from.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from tokenlens.errors import TokenLensError
from tokenlens.models.base import Completion, CompletionRequest, Usage
from tokenlens.storage import Location, StorageError, parquet_of_bytes

if TYPE_CHECKING:
    from tokenlens.tables import CallRow


class LedgerError(TokenLensError):
    """The ledger's files cannot be read or written."""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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
    #: The calibration run that paid for the call ("" in records older than the field):
    #: what lets a run's spend add up over its attempts and shards.
    run: str = ""

    def to_json(self) -> dict[str, Any]:
        raw = {
            "key": self.key,
            "kind": self.kind,
            "client": self.client,
            "salt": self.salt,
            "request": self.request.model_dump(mode="json"),
            "completion": self.completion.model_dump(mode="json"),
            "created": self.created,
        }
        return {**raw, "run": self.run} if self.run else raw

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
            run=raw.get("run", ""),
        )

    def encode(self) -> bytes:
        return canonical(self.to_json()).encode("utf-8")


@dataclass(frozen=True)
class Intent:
    """A paid call about to be sent, stored before it is (`tokenlens.ledger_store`'s
    `IntentStore`). Its answer, once stored, makes it moot; one left behind after every
    attempt of its run ended was in flight at a kill, which the upstream may have billed."""

    key: str
    kind: str
    run: str
    created: str

    def encode(self) -> bytes:
        raw = {"key": self.key, "kind": self.kind, "run": self.run, "created": self.created}
        return canonical(raw).encode("utf-8")


def decode_record(where: Location, raw: bytes) -> CallRecord:
    try:
        return CallRecord.from_json(json.loads(raw))
    except (ValueError, KeyError) as exc:
        raise LedgerError(f"{where.url}: corrupt call record ({exc})") from exc


# -- the compacted table (Parquet, schema tokenlens.tables.CALLS) -------------------


def read_table(where: Location) -> list[CallRecord]:
    try:
        raw = where.read_bytes()
    except (FileNotFoundError, StorageError) as exc:
        raise LedgerError(f"{where.url}: cannot read call table ({exc})") from exc
    return records_of_table(where, raw)


def records_of_table(where: Location, raw: bytes) -> list[CallRecord]:
    try:
        rows = cast("list[CallRow]", parquet_of_bytes(raw).to_pylist())
    except (OSError, ValueError) as exc:
        raise LedgerError(f"{where.url}: cannot read call table ({exc})") from exc
    return [_record_of_row(row) for row in rows]


def _record_of_row(row: CallRow) -> CallRecord:
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
    return CallRecord(
        key=row["key"],
        kind=row["kind"],
        client=row["client"],
        salt=row["salt"] or "",
        request=CompletionRequest.model_validate_json(row["request_json"]),
        completion=completion,
        created=row["created"],
        run=row.get("run_id") or "",
    )


def table_bytes(records: Iterable[CallRecord]) -> bytes:
    """The records as one Parquet file (schema CALLS, tables version in the metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tokenlens.tables import CALLS, TABLES_VERSION

    rows: list[CallRow] = [
        {
            "key": r.key,
            "kind": r.kind,
            "client": r.client,
            "salt": r.salt,
            "model": r.request.model,
            "request_json": r.request.model_dump_json(),
            "text": r.completion.text,
            "parsed_json": canonical(r.completion.parsed)
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
            "run_id": r.run or None,
        }
        for r in sorted(records, key=lambda rec: (rec.created, rec.key))
    ]
    table = pa.Table.from_pylist(rows, schema=CALLS)
    metadata = dict(table.schema.metadata or {})
    metadata[b"tokenlens_tables_version"] = str(TABLES_VERSION).encode()
    buffer = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(metadata), buffer)
    return buffer.getvalue()

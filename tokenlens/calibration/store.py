"""Where a calibration's tables live: Parquet objects under the store URL, written whole.

The store is a local folder (the default) or an fsspec URL such as ``s3://bucket/prefix``;
every read and write goes through `tokenlens.storage`, so a table is replaced all at once
on either (temp file + fsync + rename locally, one PUT on an object store). Layout::

    ledger/...                     every paid call ever made (shared by all runs; the
                                   layout is `tokenlens.ledger_store`'s)
    runs/<run-id>/run.json         the run's manifest (calibration id, seed, settings)
    runs/<run-id>/<table>.parquet  the stage tables of one run

Every run has its own folder (see `tokenlens.calibration.runs`), so no run clobbers
another's tables; a resumed run rewrites its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tokenlens.storage import Location, location, read_parquet, write_parquet
from tokenlens.tables import TABLES_VERSION

TABLE_NAMES: tuple[str, ...] = ("tasks", "compressions", "answers", "grades", "curve")


def write_table(table: pa.Table, where: Location) -> None:
    """Write one table, stamped with the tables' schema version, all at once."""
    metadata = dict(table.schema.metadata or {})
    metadata[b"tokenlens_tables_version"] = str(TABLES_VERSION).encode()
    write_parquet(table.replace_schema_metadata(metadata), where)


class Store:
    """Locations and typed reads/writes of one run's tables."""

    def __init__(self, root: str | Path | Location, run_id: str):
        self.root = location(root)
        self.run_id = run_id

    @property
    def ledger_dir(self) -> Location:
        return self.root.child("ledger")

    @property
    def run_dir(self) -> Location:
        return self.root.child("runs", self.run_id)

    def path(self, name: str) -> Location:
        return self.run_dir.child(f"{name}.parquet")

    def write(self, name: str, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Location:
        """Write rows with the table's declared schema (a wrong column fails here, loudly)."""
        where = self.path(name)
        write_table(pa.Table.from_pylist(list(rows), schema=schema), where)
        return where

    def write_table(self, name: str, table: pa.Table) -> Location:
        where = self.path(name)
        write_table(table, where)
        return where

    def read(self, name: str) -> list[dict[str, Any]]:
        """The rows of a table, or [] when the stage has not written it yet."""
        try:
            table = read_parquet(self.path(name))
        except FileNotFoundError:
            return []
        rows: list[dict[str, Any]] = table.to_pylist()
        return rows

    def existing(self) -> dict[str, Location]:
        return {name: self.path(name) for name in TABLE_NAMES if self.path(name).exists()}

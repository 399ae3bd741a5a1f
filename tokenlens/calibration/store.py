"""Where a calibration's tables live: Parquet files under the store root, written atomically.

Layout under the store root::

    ledger/calls.parquet           every paid call ever made (shared by all runs)
    ledger/journal-*.jsonl         calls not yet compacted (a killed run leaves these)
    runs/<run-id>/run.json         the run's manifest (calibration id, seed, settings)
    runs/<run-id>/<table>.parquet  the stage tables of one run

Every run has its own folder (see `tokenlens.calibration.runs`), so no run clobbers
another's tables; a resumed run rewrites its own.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens.policy import new_file_mode
from tokenlens.tables import TABLES_VERSION

TABLE_NAMES: tuple[str, ...] = ("tasks", "compressions", "answers", "grades", "curve")


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write via a temp file + fsync + rename: readers never see half a table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = dict(table.schema.metadata or {})
    metadata[b"tokenlens_tables_version"] = str(TABLES_VERSION).encode()
    table = table.replace_schema_metadata(metadata)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, new_file_mode())  # mkstemp's 0600 would hide the tables from other users
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Store:
    """Paths and typed reads/writes of one run's tables."""

    def __init__(self, root: str | Path, run_id: str):
        self.root = Path(root)
        self.run_id = run_id

    @property
    def ledger_dir(self) -> Path:
        return self.root / "ledger"

    @property
    def run_dir(self) -> Path:
        return self.root / "runs" / self.run_id

    def path(self, name: str) -> Path:
        return self.run_dir / f"{name}.parquet"

    def write(self, name: str, rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Path:
        """Write rows with the table's declared schema (a wrong column fails here, loudly)."""
        path = self.path(name)
        write_parquet_atomic(pa.Table.from_pylist(list(rows), schema=schema), path)
        return path

    def write_table(self, name: str, table: pa.Table) -> Path:
        path = self.path(name)
        write_parquet_atomic(table, path)
        return path

    def read(self, name: str) -> list[dict[str, Any]]:
        """The rows of a table, or [] when the stage has not written it yet."""
        path = self.path(name)
        if not path.exists():
            return []
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        return rows

    def existing(self) -> dict[str, Path]:
        return {name: self.path(name) for name in TABLE_NAMES if self.path(name).exists()}

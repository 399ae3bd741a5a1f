"""Where captured records go: part files in a local folder (0600) or under an fsspec URL.

Why part files: a store may be read (harvested) while the proxy still writes, and several
proxy processes (`--workers`) may write into the same store; each process writes its own
parts, named by time and pid, and never touches another's. Used only by the capture's
writer thread (`tokenlens.proxy.capture`), so nothing here runs on the event loop.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class Parts:
    """Part files `capture-<UTC time>-<pid>-<n>.jsonl`: rotated by count and by age."""

    def __init__(self, part_records: int, part_seconds: float) -> None:
        self.part_records = part_records
        self.part_seconds = part_seconds
        self._count = 0
        self._opened = 0.0
        self._seq = 0

    def _name(self) -> str:
        self._seq += 1
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return f"capture-{stamp}-{os.getpid()}-{self._seq:05d}.jsonl"

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        if not self._count:
            self._opened = time.monotonic()
        self._count += 1
        self._append(line)
        if self._count >= self.part_records:
            self.close()

    def tick(self) -> None:
        if self._count and time.monotonic() - self._opened >= self.part_seconds:
            self.close()

    def close(self) -> None:
        if self._count:
            self._finish()
        self._count = 0

    def _append(self, line: bytes) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError


class LocalParts(Parts):
    """A folder: each line appended as it is written (a crash loses at most the queue)."""

    def __init__(self, folder: Path, part_records: int, part_seconds: float) -> None:
        super().__init__(part_records, part_seconds)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder = folder
        self._fd: int | None = None

    def _append(self, line: bytes) -> None:
        if self._fd is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
            self._fd = os.open(self.folder / self._name(), flags, 0o600)
            os.fchmod(self._fd, 0o600)  # whatever the umask
        os.write(self._fd, line)

    def _finish(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class RemoteParts(Parts):
    """An fsspec URL (s3://, gs://, …): a part is uploaded whole when it closes."""

    def __init__(self, url: str, part_records: int, part_seconds: float) -> None:
        super().__init__(part_records, part_seconds)
        self.url = url.rstrip("/")
        self._lines: list[bytes] = []

    def _append(self, line: bytes) -> None:
        self._lines.append(line)

    def _finish(self) -> None:
        import fsspec

        data, self._lines = b"".join(self._lines), []
        with fsspec.open(f"{self.url}/{self._name()}", "wb") as handle:
            handle.write(data)


def open_parts(store: str, part_records: int, part_seconds: float) -> Parts:
    if "://" in store and not store.startswith("file://"):
        return RemoteParts(store, part_records, part_seconds)
    return LocalParts(Path(store.removeprefix("file://")), part_records, part_seconds)

"""Where the store lives: a local path or an fsspec URL (``s3://bucket/prefix``).

Why one small layer: the call ledger and the run tables must work the same on a laptop
disk and on an object store shared by many workers, and the two differ in exactly the
operations that matter for safety. A `Location` offers only those operations, each with
the strongest guarantee both sides can give:

- `write_bytes`: all or nothing. Local: temp file + fsync + rename (a reader never sees
  half a file, a crash never leaves a torn one). Object store: one PUT, which S3 applies
  atomically and acknowledges only once stored durably.
- `create`: all or nothing, and only if nothing is there yet. Local: temp file + fsync +
  ``link`` (which fails on an existing name). S3: a PUT with ``If-None-Match: *``
  (s3fs ``mode="create"``), which S3 refuses with 412 when the key exists.
- reads, listings and removals that treat "already gone" as a normal outcome.

Credentials, region and endpoint come from the standard AWS chain that s3fs/botocore
read (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_PROFILE``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``), so the
proxy and the flow need no Prefect import to reach the bucket. No locking is done here:
safety on the object store comes from conditional creates and immutable objects.
"""

from __future__ import annotations

import io
import os
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenLensError


class StorageError(TokenLensError):
    """A store URL cannot be understood or its objects cannot be read or written."""


def is_url(location: str | Path) -> bool:
    """Whether `location` names a remote store (``scheme://...``) rather than a local path."""
    text = str(location)
    return "://" in text and not text.startswith("file://")


@dataclass(frozen=True)
class Location:
    """One file or folder of the store, local or remote (immutable; `child` derives)."""

    fs: Any  # an fsspec AbstractFileSystem (fsspec ships no type stubs)
    path: str  # the filesystem's own path: absolute locally, ``bucket/key`` on S3
    protocol: str  # "file" or the URL scheme, e.g. "s3"

    # -- naming ------------------------------------------------------------------

    @property
    def local(self) -> bool:
        return self.protocol == "file"

    @property
    def url(self) -> str:
        """How a user would write this location (a path locally, a URL otherwise)."""
        return self.path if self.local else f"{self.protocol}://{self.path}"

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def child(self, *parts: str) -> Location:
        path = "/".join([self.path.rstrip("/"), *(p.strip("/") for p in parts)])
        return Location(self.fs, path, self.protocol)

    def __str__(self) -> str:
        return self.url

    # -- reading -----------------------------------------------------------------

    def exists(self) -> bool:
        try:
            return bool(self.fs.exists(self.path))
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot check ({exc})") from exc

    def read_bytes(self) -> bytes:
        """The object's bytes; FileNotFoundError (unwrapped) when it is not there."""
        try:
            data: bytes = self.fs.cat_file(self.path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot read ({exc})") from exc
        return data

    def read_text(self, encoding: str = "utf-8") -> str:
        """The object as text; FileNotFoundError (unwrapped) when it is not there."""
        data = self.read_bytes()
        try:
            return data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise StorageError(f"{self.url}: not {encoding} text ({exc})") from exc

    def read_many(self, locations: list[Location]) -> dict[str, bytes]:
        """Bytes of many objects of this filesystem at once (concurrent on S3).

        Objects that vanished between listing and reading are left out of the result.
        """
        if not locations:
            return {}
        paths = [loc.path for loc in locations]
        try:
            raw = self.fs.cat(paths, on_error="return")
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot read {len(paths)} objects ({exc})") from exc
        out: dict[str, bytes] = {}
        for path, value in raw.items():
            if isinstance(value, FileNotFoundError):
                continue
            if isinstance(value, BaseException):
                raise StorageError(f"{self.protocol}://{path}: cannot read ({value})") from value
            out[path] = value
        return out

    def _entries(self) -> list[dict[str, Any]]:
        """The folder's listing with details; [] when it does not exist."""
        try:
            return list(self.fs.ls(self.path, detail=True))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot list ({exc})") from exc

    def files(self, suffix: str = "") -> list[Location]:
        """Files directly under this folder whose name ends with `suffix`, sorted; [] if none.

        Always a fresh listing (S3 LIST is strongly consistent; no listing cache is kept).
        """
        names = sorted(
            str(e["name"])
            for e in self._entries()
            if e.get("type") == "file" and str(e["name"]).endswith(suffix)
        )
        return [Location(self.fs, _strip_protocol(n, self.protocol), self.protocol) for n in names]

    def folders(self) -> list[Location]:
        """Sub-folders directly under this folder (S3: common prefixes), sorted; [] if none."""
        names = sorted(str(e["name"]) for e in self._entries() if e.get("type") == "directory")
        return [
            Location(self.fs, _strip_protocol(n, self.protocol).rstrip("/"), self.protocol)
            for n in names
        ]

    # -- writing -----------------------------------------------------------------

    def mkdirs(self) -> None:
        """Create the folder locally; object stores have no folders (a no-op there)."""
        if self.local:
            Path(self.path).mkdir(parents=True, exist_ok=True)

    def write_bytes(self, data: bytes) -> None:
        """Replace the object all at once, durably (see the module docstring)."""
        try:
            if self.local:
                tmp = self._local_temp(data)
                try:
                    os.replace(tmp, self.path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
            else:
                self.fs.pipe_file(self.path, data)
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot write ({exc})") from exc

    def write_text(self, text: str) -> None:
        """Replace the object with UTF-8 text, all at once (`write_bytes`)."""
        self.write_bytes(text.encode("utf-8"))

    def create(self, data: bytes) -> bool:
        """Write the object only if it does not exist yet; False when it already does.

        Atomic against concurrent creators on the same name: exactly one of them gets True.
        """
        try:
            if self.local:
                tmp = self._local_temp(data)
                try:
                    os.link(tmp, self.path)
                except FileExistsError:
                    return False
                finally:
                    Path(tmp).unlink(missing_ok=True)
                return True
            self.fs.pipe_file(self.path, data, mode="create")
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot create ({exc})") from exc
        return True

    def remove(self) -> None:
        """Delete the object; one that is already gone is not an error."""
        try:
            self.fs.rm_file(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"{self.url}: cannot remove ({exc})") from exc

    def remove_many(self, locations: list[Location]) -> None:
        """Delete many objects of this filesystem (S3: batched DeleteObjects); gone is fine."""
        if self.local or not locations:
            for loc in locations:
                loc.remove()
            return
        try:
            self.fs.rm([loc.path for loc in locations])
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(
                f"{self.url}: cannot remove {len(locations)} objects ({exc})"
            ) from exc

    def _local_temp(self, data: bytes) -> str:
        """A fsync'd temp file next to the target (same filesystem, so rename/link work)."""
        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{self.name}.", suffix=".tmp")
        try:
            os.fchmod(fd, _new_file_mode())  # mkstemp's 0600 would hide it from other users
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return tmp


def _new_file_mode() -> int:
    """The mode a plain `open()` would give a new file (0644 under the usual 022 umask).

    Mirrors `tokenlens.policy.new_file_mode` on the branch that introduced it; the process
    umask is read from /proc where possible, so no other thread sees it changed.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return 0o666 & ~current


def _strip_protocol(name: str, protocol: str) -> str:
    prefix = f"{protocol}://"
    return name[len(prefix) :] if name.startswith(prefix) else name


def location(where: str | Path | Location) -> Location:
    """Parse a store location: a local path (default) or ``scheme://...`` (fsspec).

    Raises StorageError naming the location when the scheme is unknown or its fsspec
    driver (e.g. s3fs for ``s3://``) is not installed.
    """
    if isinstance(where, Location):
        return where
    text = str(where)
    if not is_url(text):
        path = text[len("file://") :] if text.startswith("file://") else text
        from fsspec.implementations.local import LocalFileSystem

        return Location(LocalFileSystem(), str(Path(path).expanduser().absolute()), "file")
    protocol = text.split("://", 1)[0]
    options: dict[str, Any] = {}
    if protocol in ("s3", "s3a"):
        # A stale listing cache would hide objects other workers just wrote.
        options["use_listings_cache"] = False
        # Our objects are small: without this, every read first HEADs the object to decide
        # on a ranged concurrent download (two round trips, and a LIST when it is absent).
        options["max_concurrency"] = 1
        # botocore reads the endpoint itself; passing it too keys fsspec's instance cache
        # on it, so a changed endpoint never reuses a client bound to the old one.
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            options["endpoint_url"] = endpoint
    try:
        import fsspec.core

        fs, path = fsspec.core.url_to_fs(text, **options)
    except ImportError as exc:
        raise StorageError(
            f"{text}: the driver for {protocol}:// is not installed ({exc}); for s3:// install s3fs"
        ) from exc
    except ValueError as exc:
        raise StorageError(f"{text}: not a store URL fsspec understands ({exc})") from exc
    if not path.strip("/"):
        raise StorageError(f"{text}: the URL names no bucket or folder")
    return Location(fs, str(path).rstrip("/"), protocol)


def join(base: str | Path | Location, *parts: str) -> str:
    """`base` (a path or URL) with `parts` appended, as a path or URL again."""
    return location(base).child(*parts).url


def unique_name(prefix: str, suffix: str) -> str:
    """A name no other writer will pick (for immutable objects: segments, duplicates)."""
    return f"{prefix}{os.getpid()}-{uuid.uuid4().hex}{suffix}"


def write_parquet(table: Any, where: Location) -> None:
    """Write an Arrow table as one Parquet object, all at once (`Location.write_bytes`)."""
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    where.write_bytes(buffer.getvalue())


def read_parquet(where: Location) -> Any:
    """An Arrow table read from one Parquet object; FileNotFoundError when absent."""
    raw = where.read_bytes()
    try:
        return parquet_of_bytes(raw)
    except (OSError, ValueError) as exc:
        raise StorageError(f"{where.url}: not a readable Parquet table ({exc})") from exc


def parquet_of_bytes(raw: bytes) -> Any:
    """An Arrow table decoded from Parquet bytes held in memory Arrow owns.

    Why the copy: decoding straight from Python `bytes` lets Arrow's pool threads hold
    the last reference to them, and dropping it needs the GIL. When that happens
    while the interpreter shuts down, the thread is torn down inside C++ and the
    whole process aborts ("terminate called without an active exception", exit
    134) after its work is done: ~1 in 10 short CLI runs did (pyarrow 21-26).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    sink.write(raw)
    return pq.read_table(pa.BufferReader(sink.getvalue()))

"""Where the policy comes from: a local file, an `http(s)://` URL or an `s3://` object.

Why conditional checks: a fleet of proxies polls the same published policy every few
seconds, so a check must cost next to nothing when nothing changed. A file is checked by
its stat signature (mtime, size, inode); an HTTP URL with `If-None-Match` /
`If-Modified-Since` (the server answers `304` without a body); an S3 object by its ETag and
LastModified from a HEAD request, fetched only when they move. A source reports what it
found; deciding whether the text is a valid policy is the store's job.

HTTP uses aiohttp with `trust_env=True` (so `HTTPS_PROXY`, `NO_PROXY` and `SSL_CERT_FILE`
apply). A session can be handed in to share the proxy's; without one each check opens a
short-lived session, which at one check per interval costs nothing measurable. s3fs is
imported only when an `s3://` source is opened, keeping the proxy's import light; its
endpoint and credentials come from the usual AWS settings (`AWS_ENDPOINT_URL`,
`AWS_PROFILE`, ...).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio.to_thread

from tokenlens.errors import PolicyError
from tokenlens.proxy.settings import POLICY_URL_SCHEMES

if TYPE_CHECKING:
    import aiohttp

Result = Literal["changed", "unchanged", "not_modified"]
#: How long one remote check may take before it counts as unreachable.
CHECK_TIMEOUT_S = 10.0


class PolicySourceError(PolicyError):
    """The policy's source could not be read (missing, unreachable, refused)."""


@dataclass(frozen=True)
class Checked:
    """What a check found: the text when it changed, else None and why not."""

    result: Result
    text: str | None = None


class PolicySource(Protocol):
    #: Where the policy comes from, for logs and the dashboard (never credentials).
    location: str

    def load(self) -> str:
        """The policy text now, at start-up (blocking). Raises PolicySourceError."""
        ...

    async def check(self) -> Checked:
        """Has the policy changed since the last load or check? Raises PolicySourceError."""
        ...


def open_source(location: str | os.PathLike[str]) -> PolicySource:
    """The source for a path or URL given to `--policy`."""
    text = os.fspath(location)
    if not text.startswith(POLICY_URL_SCHEMES):
        return FileSource(Path(text))
    if text.startswith("s3://"):
        return S3Source(text)
    return HttpSource(text)


def public_location(url: str) -> str:
    """A URL without user:password and without its query (a signed URL's query is a key)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


# --- a local file ----------------------------------------------------------------------

Signature = tuple[int, int, int]


def file_signature(path: Path) -> Signature | None:
    """(mtime_ns, size, inode) of a file, or None when it cannot be stat'ed."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class FileSource:
    """A local policy file; `write_policy` replaces it atomically, so a changed signature
    means a whole new file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        self._signature = file_signature(path)

    def load(self) -> str:
        self._signature = file_signature(self.path)
        return self._read()

    async def check(self) -> Checked:
        signature = file_signature(self.path)
        if signature == self._signature:
            return Checked("unchanged")
        self._signature = signature
        if signature is None:
            raise PolicySourceError(f"{self.path}: policy file is missing")
        return Checked("changed", self._read())

    def _read(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicySourceError(
                f"{self.path}: cannot read policy ({exc.strerror or exc})"
            ) from exc


# --- http(s) ---------------------------------------------------------------------------


class HttpSource:
    """A policy served over HTTP(S), polled with `If-None-Match` / `If-Modified-Since`."""

    def __init__(self, url: str, session: aiohttp.ClientSession | None = None) -> None:
        self.url = url
        self.location = public_location(url)
        self.session = session
        self._etag: str | None = None
        self._last_modified: str | None = None
        self._digest: str | None = None

    def load(self) -> str:
        # Start-up happens before (or outside) the server's event loop: run one check on a
        # loop of its own, in a thread so a caller's running loop is never in the way.
        found: list[Checked | BaseException] = []

        def run() -> None:
            try:
                found.append(asyncio.run(self._get(conditional=False, session=None)))
            except BaseException as exc:
                found.append(exc)

        thread = threading.Thread(target=run, name="tokenlens-policy-load")
        thread.start()
        thread.join()
        outcome = found[0]
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome.text is not None
        return outcome.text

    async def check(self) -> Checked:
        return await self._get(conditional=True, session=self.session)

    async def _get(self, *, conditional: bool, session: aiohttp.ClientSession | None) -> Checked:
        import aiohttp

        headers: dict[str, str] = {}
        if conditional and self._etag:
            headers["If-None-Match"] = self._etag
        if conditional and self._last_modified:
            headers["If-Modified-Since"] = self._last_modified
        own = session is None
        if session is None:
            session = aiohttp.ClientSession(
                trust_env=True, timeout=aiohttp.ClientTimeout(total=CHECK_TIMEOUT_S)
            )
        try:
            async with session.get(self.url, headers=headers) as response:
                if response.status == 304:
                    return Checked("not_modified")
                if response.status != 200:
                    raise PolicySourceError(
                        f"{self.location}: policy URL answered HTTP {response.status}"
                    )
                body = await response.read()
                etag = response.headers.get("ETag")
                last_modified = settled(
                    response.headers.get("Last-Modified"), response.headers.get("Date")
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PolicySourceError(
                f"{self.location}: policy URL unreachable ({type(exc).__name__})"
            ) from exc
        finally:
            if own:
                await session.close()
        self._etag, self._last_modified = etag, last_modified
        digest = hashlib.sha256(body).hexdigest()
        if conditional and digest == self._digest:
            return Checked("unchanged")  # a server without validators, same bytes
        self._digest = digest
        try:
            return Checked("changed", body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise PolicyError(f"{self.location}: policy is not UTF-8 text") from exc


def settled(last_modified: str | None, date: str | None) -> str | None:
    """`last_modified` when it can validate the next check, else None (send no
    `If-Modified-Since`; the text's own digest still tells a change from none).

    `Last-Modified` counts whole seconds: a policy published twice within one second keeps
    the first one's value, and a server asked "modified since then?" answers 304 for ever
    (`python -m http.server` does). A value is trusted only once its second is over when
    the answer was made: when it is earlier than the answer's `Date` (RFC 9110, 8.8.2.2:
    otherwise it is a weak validator), or without a `Date`, earlier than our own clock.
    """
    if last_modified is None:
        return None
    try:
        modified = parsedate_to_datetime(last_modified).timestamp()
        answered = parsedate_to_datetime(date).timestamp() if date else time.time() - 1.0
    except (TypeError, ValueError, IndexError):
        return None
    return last_modified if modified < answered else None


# --- s3 --------------------------------------------------------------------------------


class S3Source:
    """A policy object in S3 (or any S3-compatible store) read through s3fs."""

    def __init__(self, url: str) -> None:
        import s3fs  # lazy: only a proxy given an s3:// policy pays for it

        self.url = url
        self.location = public_location(url)
        self.fs: Any = s3fs.S3FileSystem(skip_instance_cache=True)
        self._tag: tuple[str, str] | None = None

    def load(self) -> str:
        self._tag = None
        checked = self._check()
        assert checked.text is not None
        return checked.text

    async def check(self) -> Checked:
        return await anyio.to_thread.run_sync(self._check)

    def _check(self) -> Checked:
        try:
            self.fs.invalidate_cache(self.url)
            info = self.fs.info(self.url)  # a HEAD request
            tag = (str(info.get("ETag", "")), str(info.get("LastModified", "")))
            if tag == self._tag:
                return Checked("unchanged")
            body: bytes = self.fs.cat_file(self.url)
        except FileNotFoundError as exc:
            raise PolicySourceError(f"{self.location}: policy object not found") from exc
        except Exception as exc:  # botocore and s3fs raise many types; all mean "cannot read"
            raise PolicySourceError(
                f"{self.location}: cannot read policy ({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc
        self._tag = tag
        try:
            return Checked("changed", body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise PolicyError(f"{self.location}: policy is not UTF-8 text") from exc

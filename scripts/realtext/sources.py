"""Where the real-text tasks' contexts come from, read from files this machine installed.

Every context is cut from a named file of a Debian package (a man page rendered to text,
a Debian changelog, a module of the Python standard library), and each task records the
package, its version, the file's path and the licence the package's copyright file gives
for it. Nothing is downloaded; a different package version changes the tasks, which
`--check` reports.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Licences of packages whose copyright file does not name one on its first "Files: *"
#: stanza (read by hand from /usr/share/doc/<package>/copyright).
LICENCE_OVERRIDES = {
    "libpython3.11-stdlib": "PSF-2.0",
    "libpython3.11-minimal": "PSF-2.0",
    "curl": "curl (MIT-style)",
    "openssh-client": "OpenSSH (BSD-style)",
}
#: Licences accepted as open (the first word of the copyright file's licence field).
OPEN_LICENCES = (
    "GPL",
    "LGPL",
    "BSD",
    "MIT",
    "Expat",
    "Apache",
    "PSF",
    "curl",
    "OpenSSH",
    "ISC",
    "Zlib",
    "public-domain",
    "GFDL",
    "MPL",
    "Artistic",
    "X11",
    "OLDAP",
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Source:
    package: str
    version: str
    path: str
    licence: str

    def row(self) -> dict[str, str]:
        return {
            "package": self.package,
            "version": self.version,
            "path": self.path,
            "licence": self.licence,
        }


@functools.cache
def package_of(path: str) -> str:
    out = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True, check=True)
    return out.stdout.split(":", 1)[0].split(",")[0].strip()


@functools.cache
def version_of(package: str) -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@functools.cache
def licence_of(package: str) -> str | None:
    """The licence of the package's `Files: *` stanza, or None when not machine-readable."""
    if package in LICENCE_OVERRIDES:
        return LICENCE_OVERRIDES[package]
    path = Path("/usr/share/doc") / package / "copyright"
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    for stanza in re.split(r"\n\s*\n", text):
        if re.search(r"^Files:\s*\*\s*$", stanza, re.M):
            found = re.search(r"^License:\s*(\S.*)$", stanza, re.M)
            if found and found.group(1).startswith(OPEN_LICENCES):
                return found.group(1).strip()
    return None


def source(path: str) -> Source | None:
    try:
        package = package_of(path)
    except subprocess.CalledProcessError:
        return None
    licence = licence_of(package)
    if licence is None:
        return None
    return Source(package, version_of(package), path, licence)


CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokenlens-realtext"


@functools.cache
def man_text(path: str) -> str:
    """A man page as `man` shows it on an 80-column terminal, without overstrikes.

    Rendering every page takes minutes: the text is cached by the page's content hash."""
    key = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    cached = CACHE / f"{key}.txt"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    text = _render(path)
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(text, encoding="utf-8")
    return text


def _render(path: str) -> str:
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    env.pop("MANPAGER", None)
    page = subprocess.run(
        ["man", "-P", "cat", "-l", path], capture_output=True, env=env, check=True
    ).stdout
    plain = subprocess.run(["col", "-bx"], input=page, capture_output=True, check=True).stdout
    return plain.decode("utf-8", errors="replace")


def read_gz(path: str) -> str:
    with gzip.open(path, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def sentences(text: str) -> set[str]:
    """A context's sentences of eight words or more, blanks normalised (the overlap unit)."""
    flat = " ".join(text.split())
    return {s for s in _SENTENCE.split(flat) if len(s.split()) >= 8}


class Overlap:
    """Admits a context only if it shares at most 10 % of sentences with those admitted."""

    def __init__(self) -> None:
        self.owner: dict[str, int] = {}
        self.sizes: list[int] = []
        self.digests: set[str] = set()

    def admit(self, text: str) -> bool:
        digest = hashlib.sha256(text.encode()).hexdigest()
        mine = sentences(text)
        shared: dict[int, int] = {}
        for s in mine:
            if s in self.owner:
                shared[self.owner[s]] = shared.get(self.owner[s], 0) + 1
        if digest in self.digests or sum(shared.values()) > 0.1 * len(mine):
            return False
        if any(count > 0.1 * self.sizes[k] for k, count in shared.items()):
            return False
        k = len(self.sizes)
        self.sizes.append(len(mine))
        self.digests.add(digest)
        for s in mine:
            self.owner.setdefault(s, k)
        return True

"""The policy in force, reloaded when its file changes.

Why poll a stat signature and not watch the file: one `os.stat` a second costs nothing,
needs no extra dependency and works on every filesystem. `write_policy` replaces the file
atomically, so the signature (mtime, size, inode) changes exactly once per publish and a
reader never sees half a file. A file that fails to load is rejected with the reason
logged, and the last good policy stays in force.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from tokenlens.errors import PolicyError
from tokenlens.policy import Policy, load_policy

log = logging.getLogger("tokenlens.proxy.policy")

Signature = tuple[int, int, int]


def file_signature(path: Path) -> Signature | None:
    """(mtime_ns, size, inode) of a file, or None when it cannot be stat'ed."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class PolicyStore:
    """Holds the last good policy from `path`; `refresh()` picks up a changed file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._signature = file_signature(self.path)
        #: Raises PolicyError: at startup there is no last good policy to fall back on.
        self.policy: Policy = load_policy(self.path)
        self.loaded_at = time.time()
        self.reloads = 0
        self.rejections = 0
        self.last_error: str | None = None
        self._listeners: list[Callable[[Policy], None]] = []

    def on_change(self, listener: Callable[[Policy], None]) -> None:
        """Call `listener(new_policy)` after every successful reload."""
        self._listeners.append(listener)

    def refresh(self) -> bool:
        """Reload if the file changed; True when a new policy is now in force."""
        signature = file_signature(self.path)
        if signature == self._signature:
            return False
        self._signature = signature
        if signature is None:
            self._reject(f"{self.path}: policy file is missing")
            return False
        try:
            policy = load_policy(self.path)
        except PolicyError as exc:
            self._reject(str(exc))
            return False
        self.policy = policy
        self.loaded_at = time.time()
        self.reloads += 1
        self.last_error = None
        log.info(
            "policy reloaded: %s (calibration %s, %d classes)",
            self.path,
            policy.calibration_id,
            len(policy.classes),
        )
        for listener in self._listeners:
            listener(policy)
        return True

    def _reject(self, reason: str) -> None:
        self.rejections += 1
        self.last_error = reason
        log.warning(
            "policy rejected, keeping calibration %s in force: %s",
            self.policy.calibration_id,
            reason,
        )

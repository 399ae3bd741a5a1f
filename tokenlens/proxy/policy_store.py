"""The policy in force, reloaded when its source changes.

Why a store over a source: where the policy lives (a file, an HTTP URL, an S3 object; see
`policy_source`) is separate from what the proxy does with it. The store asks its source
on every poll whether anything changed (a stat call or a conditional request), validates
new text, and swaps the policy in only when it is a good one. A source that cannot be
read or text that is not a valid policy is rejected with the reason logged, and the last
good policy stays in force; listeners hear about every poll result (for `/metrics`) and
every successful change (to reset the shadow judge's windows).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

from tokenlens.errors import PolicyError
from tokenlens.policy import Policy, offline_reason, parse_policy
from tokenlens.proxy.policy_source import (
    FileSource,
    PolicySource,
    PolicySourceError,
    open_source,
)

log = logging.getLogger("tokenlens.proxy.policy")


class PolicyStore:
    """Holds the last good policy from `source`; `poll()` picks up a change."""

    def __init__(
        self, source: str | os.PathLike[str] | PolicySource, *, allow_offline: bool = False
    ) -> None:
        self.source: PolicySource = (
            open_source(source) if isinstance(source, str | os.PathLike) else source
        )
        #: Apply a policy calibrated offline (on the embedded local model) to the upstream
        #: anyway: `serve --allow-offline-policy`, for demos. Off, such a policy is refused
        #: at start-up and on every reload (`offline_reason`).
        self.allow_offline = allow_offline
        #: Where the policy comes from, as shown on the dashboard (a path or a public URL).
        self.path = (
            self.source.path if isinstance(self.source, FileSource) else self.source.location
        )
        #: Raises PolicyError: at startup there is no last good policy to fall back on.
        self.policy: Policy = self._parse(self.source.load())
        self.loaded_at = time.time()
        self.reloads = 0
        self.rejections = 0
        self.last_error: str | None = None
        self._listeners: list[Callable[[Policy], None]] = []
        self._poll_listeners: list[Callable[[str], None]] = []

    def on_change(self, listener: Callable[[Policy], None]) -> None:
        """Call `listener(new_policy)` after every successful reload."""
        self._listeners.append(listener)

    def on_poll(self, listener: Callable[[str], None]) -> None:
        """Call `listener(result)` after every poll: unchanged, not_modified, reloaded,
        unreachable or invalid."""
        self._poll_listeners.append(listener)

    def refresh(self) -> bool:
        """`poll()` for callers without an event loop (scripts, tests)."""
        return asyncio.run(self.poll())

    async def poll(self) -> bool:
        """Ask the source; True when a new policy is now in force."""
        try:
            checked = await self.source.check()
        except PolicySourceError as exc:
            return self._reject(str(exc), "unreachable")
        except PolicyError as exc:
            return self._reject(str(exc), "invalid")
        if checked.text is None:
            self._tell(checked.result)
            return False
        try:
            policy = self._parse(checked.text)
        except PolicyError as exc:
            return self._reject(str(exc), "invalid")
        self.policy = policy
        self.loaded_at = time.time()
        self.reloads += 1
        self.last_error = None
        log.info(
            "policy reloaded: %s (calibration %s, %d classes)",
            self.source.location,
            policy.calibration_id,
            len(policy.classes),
        )
        self._tell("reloaded")
        for listener in self._listeners:
            listener(policy)
        return True

    def _parse(self, text: str) -> Policy:
        """A validated policy, or PolicyError naming the source, whatever the text holds."""
        try:
            policy = parse_policy(text, self.source.location)
        except (RecursionError, ValueError) as exc:  # e.g. JSON nested beyond the limit
            raise PolicyError(
                f"{self.source.location}: unreadable policy ({type(exc).__name__})"
            ) from exc
        offline = offline_reason(policy)
        if offline is not None and not self.allow_offline:
            raise PolicyError(
                f"{self.source.location}: refused: {offline}. Calibrate with "
                "ANTHROPIC_API_KEY set (--backend anthropic) for a policy to apply to Claude, "
                "or pass --allow-offline-policy to apply it anyway (a demo)"
            )
        if offline is not None:
            log.warning("applying an offline policy (--allow-offline-policy): %s", offline)
        return policy

    def _reject(self, reason: str, kind: str) -> bool:
        self.rejections += 1
        self.last_error = reason
        log.warning(
            "policy rejected, keeping calibration %s in force: %s",
            self.policy.calibration_id,
            reason,
        )
        self._tell(kind)
        return False

    def _tell(self, result: str) -> None:
        for listener in self._poll_listeners:
            listener(result)

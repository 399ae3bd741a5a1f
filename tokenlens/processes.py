"""Whether a process still runs on this machine: the one check behind stale-owner cleanup
(the ledger's orphaned journals, orphaned flow runs, a dead proxy worker's gauges)."""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (signal 0 probes, sends nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True

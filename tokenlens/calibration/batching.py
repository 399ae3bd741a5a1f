"""Batch mode: send a stage's missing answer calls as one Message Batch (half price).

The batch id and its requests are written to ``<ledger>/pending-batches.json`` right
after submission, so a run killed while the batch is processing resumes by polling the
same batch on the next run instead of paying for a second one. Every entry that comes
back is stored in the ledger at once; entries that failed are left missing, and the
stage's normal (real-time) path makes those calls.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tokenlens.ledger import LedgerClient
from tokenlens.models.base import Completion, CompletionRequest
from tokenlens.storage import Location

log = logging.getLogger(__name__)

PENDING_FILE = "pending-batches.json"


def _pending_path(client: LedgerClient) -> Location:
    return client.ledger.location.child(PENDING_FILE)


def _read_pending(path: Location) -> dict[str, dict[str, Any]]:
    try:
        data: dict[str, dict[str, Any]] = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    return data


def _write_pending(path: Location, pending: dict[str, dict[str, Any]]) -> None:
    path.write_bytes(json.dumps(pending).encode("utf-8"))


def complete_in_batch(client: LedgerClient, requests: list[CompletionRequest], **poll: Any) -> int:
    """Obtain `requests` through Message Batches; returns how many were stored.

    Resumes batches a previous run submitted, then submits one batch for what is still
    missing. `poll` is passed to `wait_for_batch` (tests use short waits).
    """
    from tokenlens.models.anthropic_backend import AnthropicClient
    from tokenlens.models.batches import collect_batch, submit_batch, wait_for_batch

    inner = client.inner
    if not isinstance(inner, AnthropicClient):
        raise TypeError("batch mode needs the Anthropic backend")
    path = _pending_path(client)
    pending = _read_pending(path)
    stored = 0
    for batch_id, entries in list(pending.items()):
        items = {cid: CompletionRequest.model_validate(raw) for cid, raw in entries.items()}
        log.info("resuming batch %s (%d requests)", batch_id, len(items))
        wait_for_batch(inner, batch_id, **poll)
        stored += _store(client, collect_batch(inner, batch_id, items), items)
        del pending[batch_id]
        _write_pending(path, pending)
    missing = {client.key(r)[:64]: r for r in requests if client.cached(r) is None}
    if not missing or client.spend.exhausted:
        return stored
    batch_id = submit_batch(inner, list(missing.items()))
    pending[batch_id] = {cid: r.model_dump(mode="json") for cid, r in missing.items()}
    _write_pending(path, pending)
    wait_for_batch(inner, batch_id, **poll)
    stored += _store(client, collect_batch(inner, batch_id, missing), missing)
    del pending[batch_id]
    _write_pending(path, pending)
    return stored


def _store(
    client: LedgerClient, outcomes: dict[str, Any], requests: dict[str, CompletionRequest]
) -> int:
    stored = 0
    for custom_id, outcome in outcomes.items():
        completion = outcome if isinstance(outcome, Completion) else None
        paid = getattr(outcome, "completion", None)
        if completion is None and isinstance(paid, Completion):
            completion = paid  # cut off at max_tokens, but paid: keep it
        if completion is None:
            log.warning("batch entry %s failed (%s); will be sent in real time", custom_id, outcome)
            continue
        client.record(requests[custom_id], completion)
        stored += 1
    return stored

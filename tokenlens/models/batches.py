"""Message Batches (half price) for whole calibration stages: submit, poll, collect.

Why three steps and not one call: a batch can take hours, and its results were paid for,
so the flow should record the batch id right after `submit_batch` and be able to resume
with `wait_for_batch` + `collect_batch` after a restart. `run_batch` chains them.

Each entry ends as a `Completion` (costed at the batch price, `backend="anthropic-batch"`)
or a `ModelCallError`: errored entries carry the API's error (retryable when the error
type is transient), expired and canceled ones are retryable, and a structured reply that
does not validate is an `InvalidOutputError`. Batches are not retried here: the caller
decides whether to resubmit the failed entries (a resubmission is another paid call).
Per-entry `latency_s` is 0.0: a batch has no per-request latency.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from tokenlens.errors import ModelCallError
from tokenlens.models.anthropic_backend import AnthropicClient, completion_from_message
from tokenlens.models.base import Completion, CompletionRequest

__all__ = ["BatchOutcome", "collect_batch", "run_batch", "submit_batch", "wait_for_batch"]

log = logging.getLogger("tokenlens.models")

BatchOutcome = Completion | ModelCallError
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TRANSIENT_ERRORS = frozenset(
    {"api_error", "overloaded_error", "rate_limit_error", "timeout_error"}
)


def submit_batch(client: AnthropicClient, items: Sequence[tuple[str, CompletionRequest]]) -> str:
    """Submit `(custom_id, request)` pairs as one Message Batch; returns the batch id."""
    if not items:
        raise ValueError("a batch needs at least one request")
    seen: set[str] = set()
    for custom_id, _ in items:
        if not _CUSTOM_ID.match(custom_id):
            raise ValueError(
                f"batch custom_id {custom_id!r} must be 1-64 letters, digits, '-' or '_'"
            )
        if custom_id in seen:
            raise ValueError(f"batch custom_id {custom_id!r} appears twice")
        seen.add(custom_id)
    entries = [{"custom_id": cid, "params": client.params_for(req)} for cid, req in items]
    batch_id = client.batch_create(entries)
    log.info("submitted batch %s with %d requests", batch_id, len(entries))
    return batch_id


def wait_for_batch(
    client: AnthropicClient,
    batch_id: str,
    *,
    poll_initial_s: float = 5.0,
    poll_max_s: float = 60.0,
    timeout_s: float = 25 * 3600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll until the batch has ended (backoff doubles up to `poll_max_s`); returns it.

    Raises:
        ModelCallError: the batch did not end within `timeout_s` (retryable: poll again).
    """
    deadline = time.monotonic() + timeout_s
    wait = poll_initial_s
    while True:
        batch = client.batch_retrieve(batch_id)
        if batch.get("processing_status") == "ended":
            return batch
        if time.monotonic() + wait > deadline:
            raise ModelCallError(
                f"batch {batch_id} still {batch.get('processing_status')} after {timeout_s:.0f} s",
                retryable=True,
            )
        log.info("batch %s is %s; next poll in %.1f s", batch_id, batch["processing_status"], wait)
        sleep(wait)
        wait = min(wait * 2, poll_max_s)


def _entry_outcome(result: dict[str, Any], request: CompletionRequest) -> BatchOutcome:
    kind = result.get("type")
    if kind == "succeeded":
        try:
            return completion_from_message(result["message"], request, latency_s=0.0, batch=True)
        except ModelCallError as exc:  # invalid structured reply, or cut off at max_tokens
            return exc
    if kind == "errored":
        error = (result.get("error") or {}).get("error") or {}
        error_type = str(error.get("type") or "error")
        return ModelCallError(
            f"batch entry errored: {error_type}: {error.get('message', '')}",
            retryable=error_type in _TRANSIENT_ERRORS,
        )
    return ModelCallError(f"batch entry {kind or 'has no result'}", retryable=True)


def collect_batch(
    client: AnthropicClient, batch_id: str, requests: dict[str, CompletionRequest]
) -> dict[str, BatchOutcome]:
    """Every submitted custom_id mapped to its `Completion` or `ModelCallError`."""
    outcomes: dict[str, BatchOutcome] = {}
    for line in client.batch_results(batch_id):
        custom_id = line.get("custom_id")
        if custom_id not in requests:
            log.warning("batch %s returned an unknown custom_id; ignored", batch_id)
            continue
        outcomes[custom_id] = _entry_outcome(line.get("result") or {}, requests[custom_id])
    for custom_id in requests:
        outcomes.setdefault(
            custom_id, ModelCallError("batch returned no result for this entry", retryable=True)
        )
    return outcomes


def run_batch(
    client: AnthropicClient,
    items: Sequence[tuple[str, CompletionRequest]],
    *,
    poll_initial_s: float = 5.0,
    poll_max_s: float = 60.0,
    timeout_s: float = 25 * 3600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, BatchOutcome]:
    """Submit, wait and collect in one call (see module docstring for resuming instead)."""
    batch_id = submit_batch(client, items)
    wait_for_batch(
        client,
        batch_id,
        poll_initial_s=poll_initial_s,
        poll_max_s=poll_max_s,
        timeout_s=timeout_s,
        sleep=sleep,
    )
    return collect_batch(client, batch_id, dict(items))

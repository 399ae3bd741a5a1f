"""Model calls in flight across every worker of a sharded run: Prefect global limits.

Global limits: every model call of a shard holds a slot of the Prefect global concurrency
limit `tokenlens-calls-<model>` when that limit exists, so N workers on one API key keep
at most `limit` calls in flight between them (per worker, `concurrency` still applies).
The shard checks once whether a limit exists: Prefect's `concurrency()` would otherwise
log a warning per call and go ahead without a slot (it never waits on a missing limit;
with `strict=True` it raises), so a missing limit means "not limited", said once.

This module imports Prefect (lazily).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tokenlens.calibration.shards import ShardError
from tokenlens.models.base import Completion, CompletionRequest, ModelClient

#: How long a slot's lease lives without renewal: a dead worker's slots come back after it.
LEASE_SECONDS = 60.0


def limit_name(model: str) -> str:
    """The global limit of one model's calls, e.g. `tokenlens-calls-claude-haiku-4-5`."""
    return "tokenlens-calls-" + re.sub(r"[^A-Za-z0-9._-]+", "-", model)


def ensure_call_limits(models: Iterable[str], slots: int) -> list[str]:
    """Create (or resize) the global limit of each model's calls; returns their names."""
    from prefect.client.orchestration import get_client

    if slots < 1:
        raise ShardError(f"calls_limit must be at least 1, got {slots}")
    names = sorted({limit_name(model) for model in models})
    with get_client(sync_client=True) as client:
        for name in names:
            client.upsert_global_concurrency_limit_by_name(name, slots)
    return names


def existing_limits(models: Iterable[str]) -> set[str]:
    """The models (of `models`) whose call limit exists and is active on the Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    found: set[str] = set()
    with get_client(sync_client=True) as client:
        for model in set(models):
            try:
                limit = client.read_global_concurrency_limit_by_name(limit_name(model))
            except ObjectNotFound:
                continue
            if limit.active:
                found.add(model)
    return found


class LimitedClient:
    """A `ModelClient` whose calls to the limited models each hold one global slot.

    Same `name` as the backend it wraps, so ledger keys do not change; anything else
    (the model id, batch methods) is the wrapped backend's.
    """

    def __init__(self, inner: ModelClient, limited_models: set[str]):
        self.inner = inner
        self.name = inner.name
        self.limited_models = limited_models

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def complete(self, request: CompletionRequest) -> Completion:
        if request.model not in self.limited_models:
            return self.inner.complete(request)
        from prefect.concurrency.sync import concurrency

        # strict: the limit was seen when the shard started; if it vanished, fail the call
        # rather than run unlimited. A failed lease renewal (an API blip) must not kill a
        # call that is being paid for.
        with concurrency(
            limit_name(request.model),
            lease_duration=LEASE_SECONDS,
            strict=True,
            raise_on_lease_renewal_failure=False,
        ):
            return self.inner.complete(request)

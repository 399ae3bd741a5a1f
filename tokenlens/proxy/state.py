"""What every request of a running proxy shares: settings, counters, policy, clients.

Its own module so the request path (`handler`), what it plans (`plan`), what it does after
the answer (`followup`) and the dashboard read one definition without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp

from tokenlens.proxy.apply import Compressor
from tokenlens.proxy.background import BackgroundWork
from tokenlens.proxy.metrics import ProxyMetrics
from tokenlens.proxy.observe import Observer
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.proxy.settings import ProxySettings
from tokenlens.proxy.shadow import ShadowJudge
from tokenlens.proxy.stats import ProxyStats


@dataclass
class ProxyState:
    """Everything a request needs, built once by the app's lifespan."""

    settings: ProxySettings
    stats: ProxyStats
    store: PolicyStore | None
    compressor: Compressor
    #: The one HTTP client to the upstream: relayed requests and background calls.
    session: aiohttp.ClientSession
    background: BackgroundWork
    shadow: ShadowJudge | None = None
    #: Metrics and access log: every relayed request ends in `observer.finish`.
    observer: Observer = field(default_factory=lambda: Observer(ProxyMetrics()))

    @property
    def compressing(self) -> bool:
        return self.store is not None or self.settings.compresses

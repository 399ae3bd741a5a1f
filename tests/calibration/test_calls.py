"""A run closes its backend's connections when it ends (`Calls.close`).

Left to the garbage collector, the SDK's pooled sockets were closed with a ResourceWarning
at whatever moment it ran: in CI, inside a later test, which then failed on it."""

from __future__ import annotations

from pathlib import Path

from tokenlens.calibration.context import Calls
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter
from tokenlens.models.anthropic_backend import AnthropicClient


class Wrapper:
    """A client wrapper with no `close` of its own (like a limit shared by workers)."""

    def __init__(self, inner: AnthropicClient) -> None:
        self.inner = inner
        self.name = inner.name

    def complete(self, request):  # type: ignore[no-untyped-def]
        return self.inner.complete(request)


def test_closing_the_calls_closes_the_sdk_client_under_any_wrapper(tmp_path: Path) -> None:
    client = AnthropicClient(api_key="k", base_url="http://127.0.0.1:9")
    sdk = client._sdk  # made on first use, as a paid call would
    ledger = Ledger(tmp_path / "ledger")
    calls = Calls(ledger, SpendMeter(), LedgerClient(Wrapper(client), ledger), judges={})
    assert not sdk.is_closed()
    calls.close()
    assert sdk.is_closed()

"""Model access: one interface (`ModelClient`), several backends, chosen by name.

Backends (`anthropic_backend`, `local`) are imported only when `make_client` picks them.
"""

from tokenlens.models.base import Completion, CompletionRequest, Message, ModelClient, Usage
from tokenlens.models.registry import BACKENDS, make_client, resolve_backend

__all__ = [
    "BACKENDS",
    "Completion",
    "CompletionRequest",
    "Message",
    "ModelClient",
    "Usage",
    "make_client",
    "resolve_backend",
]

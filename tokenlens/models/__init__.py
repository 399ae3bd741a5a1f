"""Model access: one interface (`ModelClient`), several backends."""

from tokenlens.models.base import Completion, CompletionRequest, Message, ModelClient, Usage

__all__ = ["Completion", "CompletionRequest", "Message", "ModelClient", "Usage"]

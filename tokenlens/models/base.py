"""The one interface every completion goes through.

The flow, the judge and the proxy's shadow judge send a `CompletionRequest` to a
`ModelClient` and get a `Completion` back; they never care which backend answered.
Backends raise only `tokenlens.errors.ModelCallError` (with `retryable` set).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    #: A string, or a list of Messages API content blocks (dicts) passed through unchanged.
    content: str | list[dict[str, Any]]


class CompletionRequest(BaseModel):
    """A Messages-API-shaped request, plus the few knobs calibration needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    messages: tuple[Message, ...]
    system: str | list[dict[str, Any]] | None = None
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=1.0)
    #: Sampling seed. The local backend honours it; Anthropic ignores it (the replicate
    #: index still enters the ledger key, so repeats stay distinct calls).
    seed: int = 0
    #: When set, the backend constrains output to this JSON schema and fills `parsed`.
    json_schema: dict[str, Any] | None = None
    #: The tool definitions of an agent's body (the API refuses tool_use / tool_result
    #: blocks without them). Left out of the ledger key when None, so keys of requests
    #: without tools are what they always were.
    tools: tuple[dict[str, Any], ...] | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any], **overrides: Any) -> CompletionRequest:
        """Build from a Messages API body (as `compress_request` returns it)."""
        fields = {
            "model": body["model"],
            "messages": tuple(Message(**m) for m in body["messages"]),
            "system": body.get("system"),
            "max_tokens": body.get("max_tokens", 512),
        }
        if "temperature" in body:
            fields["temperature"] = body["temperature"]
        if body.get("tools"):
            fields["tools"] = tuple(body["tools"])
        fields.update(overrides)
        return cls(**fields)


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Completion(BaseModel):
    """What came back from one call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    parsed: dict[str, Any] | None = None
    usage: Usage = Usage()
    model: str
    stop_reason: str | None = None
    latency_s: float = 0.0
    #: None when the model has no entry in the pricing table (never a silent $0 guess).
    cost_usd: float | None = None
    backend: str = ""


@runtime_checkable
class ModelClient(Protocol):
    """A completion backend. `name` enters the ledger key of every call it makes."""

    name: str

    def complete(self, request: CompletionRequest) -> Completion:
        """Send one request; raise `ModelCallError` on failure (after the backend's retries)."""
        ...

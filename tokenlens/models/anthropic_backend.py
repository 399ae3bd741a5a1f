"""The Anthropic backend: the real product path, through the official `anthropic` SDK.

This is the only module that imports `anthropic` (lazily, at its first call), and the
one place its exceptions become `tokenlens.errors.ModelCallError`.

Choices, and why:

* Retries: the SDK's own retries are off (`max_retries=0`); `tokenlens.models.retry` is the
  one retry layer, so attempts are counted, logged and capped in one place.
* Structured output: the current GA form, `output_config={"format": {"type": "json_schema",
  "schema": ...}}` on `messages.create` (SDK >= 2.x; no beta header). The schema sent is
  passed through the SDK's `transform_schema` (which makes it strict-compatible, e.g. moves
  `minimum`/`maximum` into descriptions); the reply is validated locally against the
  *original* schema, so such constraints still hold. A forced tool call (`structured="tool"`)
  is kept as a fallback for models or gateways without structured outputs; it returns the
  object as the tool's `input`.
* Cut-off output: `stop_reason == "max_tokens"` raises `TruncatedOutputError` carrying the
  completion (it was paid for), because a truncated answer would be graded as if the
  compression had hurt it.
* Base URL: `ANTHROPIC_BASE_URL` when set (the loopback test server, or a gateway).
* Temperature: SDK 1.0 removed `temperature` from the typed `messages.create` signature
  (the API still takes it for the models we price, and newer models accept only 1.0), so
  it travels in `extra_body`, and only when it is not the default 1.0. Clients for models
  that reject it set `send_temperature=False`. `seed` is not an API parameter: ignored.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from tokenlens.errors import ModelCallError
from tokenlens.models.base import Completion, CompletionRequest, Usage
from tokenlens.models.retry import (
    InvalidOutputError,
    RateLimitedError,
    RetryPolicy,
    TruncatedOutputError,
    call_with_retries,
)
from tokenlens.models.structured import parse_structured, validate_object
from tokenlens.pricing import cost_usd

if TYPE_CHECKING:
    import anthropic

__all__ = ["DEFAULT_MODEL", "AnthropicClient", "completion_from_message", "request_params"]

DEFAULT_MODEL = "claude-haiku-4-5"
StructuredMode = Literal["output_config", "tool"]
#: The tool name used by the forced-tool fallback for structured output.
STRUCTURED_TOOL = "record_response"
#: Body keys the count_tokens endpoint accepts (others, like max_tokens, are dropped).
_COUNT_TOKENS_KEYS = ("model", "messages", "system", "tools", "tool_choice", "output_config")
_NEVER_RETRY = frozenset({400, 401, 402, 403, 404, 413, 422})


def request_params(
    request: CompletionRequest, *, structured: StructuredMode, send_temperature: bool = True
) -> dict[str, Any]:
    """The Messages API body for a request (also used for batch entries).

    `temperature` is included only when it differs from the API default of 1.0 and
    `send_temperature` is on (models newer than Opus 4.6 reject any other value).
    """
    from anthropic import transform_schema

    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": [m.model_dump() for m in request.messages],
    }
    if send_temperature and request.temperature != 1.0:
        params["temperature"] = request.temperature
    if request.system is not None:
        params["system"] = request.system
    if request.tools:
        params["tools"] = list(request.tools)
    if request.json_schema is not None:
        schema = transform_schema(request.json_schema)
        if structured == "tool":
            params["tools"] = [
                {
                    "name": STRUCTURED_TOOL,
                    "description": "Record the response in the required structure.",
                    "input_schema": schema,
                }
            ]
            params["tool_choice"] = {"type": "tool", "name": STRUCTURED_TOOL}
        else:
            params["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    return params


def completion_from_message(
    message: dict[str, Any],
    request: CompletionRequest,
    *,
    latency_s: float,
    batch: bool = False,
) -> Completion:
    """A `Completion` from a Message object (as a dict); validates structured output.

    Raises:
        InvalidOutputError: a structured reply that does not parse or match the schema.
        TruncatedOutputError: generation stopped at max_tokens.
    """
    raw_usage = message.get("usage") or {}
    usage = Usage(
        input_tokens=raw_usage.get("input_tokens") or 0,
        output_tokens=raw_usage.get("output_tokens") or 0,
        cache_read_tokens=raw_usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=raw_usage.get("cache_creation_input_tokens") or 0,
    )
    model = str(message.get("model") or request.model)
    blocks = message.get("content") or []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    tool_input = next((b.get("input") for b in blocks if b.get("type") == "tool_use"), None)
    stop_reason = message.get("stop_reason")
    parsed: dict[str, Any] | None = None
    if request.json_schema is not None:
        if stop_reason == "max_tokens":
            raise InvalidOutputError(
                f"structured reply was cut off at max_tokens={request.max_tokens}"
            )
        if tool_input is not None:
            parsed = validate_object(tool_input, request.json_schema)
            text = text or json.dumps(parsed)
        else:
            parsed = parse_structured(text, request.json_schema)
    completion = Completion(
        text=text,
        parsed=parsed,
        usage=usage,
        model=model,
        stop_reason=stop_reason,
        latency_s=latency_s,
        cost_usd=cost_usd(
            model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            batch=batch,
        ),
        backend="anthropic-batch" if batch else "anthropic",
    )
    if stop_reason == "max_tokens":
        raise TruncatedOutputError(
            f"answer was cut off at max_tokens={request.max_tokens} "
            f"({usage.output_tokens} output tokens)",
            completion,
        )
    return completion


class AnthropicClient:
    """`ModelClient` over the Anthropic Messages API.

    Args:
        model: the default model id for callers that build requests from this client.
        api_key: defaults to `ANTHROPIC_API_KEY`.
        base_url: defaults to `ANTHROPIC_BASE_URL`, then the SDK's default.
        timeout_s: per-attempt HTTP timeout.
        retry: the retry policy (attempts and waits).
        structured: "output_config" (default) or "tool" (forced tool call fallback).
        stream: send requests as SSE streams and assemble the final message (for very long
            generations; same result otherwise).
        send_temperature: send a non-default temperature (off for models that reject it).
    """

    name = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        structured: StructuredMode = "output_config",
        stream: bool = False,
        send_temperature: bool = True,
    ) -> None:
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelCallError(
                "the Anthropic backend needs an API key: set ANTHROPIC_API_KEY "
                "(or choose the local backend)",
                retryable=False,
            )
        if structured not in ("output_config", "tool"):
            raise ValueError(f"structured must be 'output_config' or 'tool', not {structured!r}")
        self.model = model
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.structured: StructuredMode = structured
        self.stream = stream
        self.send_temperature = send_temperature
        self.retry = retry or RetryPolicy()
        self._key = key
        self._timeout_s = timeout_s
        self._sdk_client: anthropic.Anthropic | None = None
        self._sdk_lock = threading.Lock()

    @property
    def _sdk(self) -> anthropic.Anthropic:
        """The SDK client, built on first use: importing `anthropic` costs 2-4 s, which a
        rerun answered entirely from the ledger never needs to pay."""
        with self._sdk_lock:
            if self._sdk_client is None:
                import anthropic

                self._sdk_client = anthropic.Anthropic(
                    api_key=self._key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self._timeout_s,
                )
            return self._sdk_client

    def close(self) -> None:
        with self._sdk_lock:
            if self._sdk_client is not None:
                self._sdk_client.close()

    # --- ModelClient ----------------------------------------------------------------

    def complete(self, request: CompletionRequest) -> Completion:
        """One Messages API call under the retry policy (see module docstring)."""
        params = self.params_for(request)
        # Not in the SDK's typed signature any more (see module docstring): send it raw.
        extra_body = {"temperature": params.pop("temperature")} if "temperature" in params else None

        def attempt() -> Completion:
            started = time.perf_counter()
            with translate_errors():
                if self.stream:
                    with self._sdk.messages.stream(**params, extra_body=extra_body) as stream:
                        message = stream.get_final_message()
                else:
                    message = self._sdk.messages.create(**params, extra_body=extra_body)
            return completion_from_message(
                message.model_dump(mode="json"),
                request,
                latency_s=time.perf_counter() - started,
            )

        return call_with_retries(
            attempt, policy=self.retry, what=f"anthropic messages ({request.model})"
        )

    # --- extras ---------------------------------------------------------------------

    def params_for(self, request: CompletionRequest) -> dict[str, Any]:
        """The wire body this client sends for `request` (also a batch entry's params)."""
        return request_params(
            request, structured=self.structured, send_temperature=self.send_temperature
        )

    def count_tokens(self, body: dict[str, Any] | CompletionRequest) -> int:
        """Exact input tokens of a request, from the count_tokens endpoint."""
        if isinstance(body, CompletionRequest):
            body = self.params_for(body)
        params = {k: body[k] for k in _COUNT_TOKENS_KEYS if k in body}
        params.setdefault("model", self.model)

        def attempt() -> int:
            with translate_errors():
                return int(self._sdk.messages.count_tokens(**params).input_tokens)

        return call_with_retries(
            attempt, policy=self.retry, what=f"anthropic count_tokens ({params['model']})"
        )

    def batch_create(self, entries: list[dict[str, Any]]) -> str:
        """Submit a Message Batch of `{custom_id, params}` entries; returns the batch id."""

        def attempt() -> str:
            with translate_errors():
                return str(self._sdk.messages.batches.create(requests=entries).id)  # type: ignore[arg-type]

        return call_with_retries(attempt, policy=self.retry, what="anthropic batch create")

    def batch_retrieve(self, batch_id: str) -> dict[str, Any]:
        """The batch object (processing_status, request_counts, ...) as a dict."""

        def attempt() -> dict[str, Any]:
            with translate_errors():
                return self._sdk.messages.batches.retrieve(batch_id).model_dump(mode="json")

        return call_with_retries(attempt, policy=self.retry, what="anthropic batch retrieve")

    def batch_results(self, batch_id: str) -> list[dict[str, Any]]:
        """Every `{custom_id, result}` line of an ended batch, as dicts."""

        def attempt() -> list[dict[str, Any]]:
            with translate_errors():
                return [
                    line.model_dump(mode="json")
                    for line in self._sdk.messages.batches.results(batch_id)
                ]

        return call_with_retries(attempt, policy=self.retry, what="anthropic batch results")


@contextmanager
def translate_errors() -> Iterator[None]:
    """Turn SDK exceptions raised inside the block into `ModelCallError`."""
    try:
        yield
    except ModelCallError:
        raise
    except Exception as exc:
        translated = _translate(exc)
        if translated is None:
            raise
        raise translated from exc


def _translate(exc: BaseException) -> ModelCallError | None:
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return ModelCallError("request timed out", retryable=True, status=None)
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelCallError(f"connection error: {exc}", retryable=True, status=None)
    if isinstance(exc, anthropic.APIStatusError):
        return _translate_status(exc)
    if isinstance(exc, anthropic.AnthropicError):
        return ModelCallError(f"Anthropic SDK error: {exc}", retryable=False)
    return None


def _translate_status(exc: anthropic.APIStatusError) -> ModelCallError:
    status = exc.status_code
    kind = exc.type or "error"
    detail = exc.api_message or str(exc)
    code = exc.error_code or ""
    described = f"HTTP {status} {kind}{f' ({code})' if code else ''}: {detail}"
    if "spend_limit" in code or kind == "billing_error" or status == 402:
        return ModelCallError(
            f"spend limit or billing problem, not retried: {described}",
            retryable=False,
            status=status,
        )
    if status == 429:
        return RateLimitedError(
            f"rate limited: {described}", retry_after=_retry_after(exc), status=status
        )
    if status in _NEVER_RETRY or (400 <= status < 500 and status not in (408, 409)):
        hint = {
            401: " (check ANTHROPIC_API_KEY)",
            403: " (the key lacks permission)",
            404: " (unknown model or endpoint?)",
        }.get(status, "")
        return ModelCallError(described + hint, retryable=False, status=status)
    # 408, 409, 5xx, 529 overloaded: worth another try.
    return ModelCallError(described, retryable=True, status=status)


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    """Seconds from a `retry-after` header (or `retry-after-ms`), if present and sane."""
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue
        if 0 <= value <= 3600:
            return value
    return None

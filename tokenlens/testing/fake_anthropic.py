"""A real Anthropic-shaped HTTP server on loopback, for tests and benches.

One module past 500 lines on purpose: the routes, their fault injection and the recorded
requests share one server state; the answer logic is in fake_logic.py, the prompt-cache
check in prompt_cache.py.

Why a server and not a mock: the official SDK, the retry layer and the proxy are exercised
over real HTTP, with the real wire format (JSON bodies, SSE streams, JSONL batch results,
error bodies, `retry-after`), so a test that passes here fails for the right reasons there.

`FakeAnthropic` runs uvicorn (a starlette app) in a background thread on 127.0.0.1, on a
port the OS picks. It speaks:

* `POST /v1/messages` - non-streaming, and SSE streaming (`"stream": true`) with the event
  sequence message_start, content_block_start, ping, content_block_delta..., content_block_stop,
  message_delta, message_stop, flushed event by event (`stream_delay_s` between events).
* `POST /v1/messages/count_tokens`.
* `POST /v1/messages/batches`, `GET /v1/messages/batches/{id}` (in_progress until it has
  been polled `batch_polls` times, then ended), `GET .../results` (JSONL).

What it answers is in `tokenlens.testing.fake_logic`. It records every request (method,
path, query, headers with key values redacted, parsed JSON body, time, response status)
and injects faults on demand (`inject`) or at random with a seed (`set_fault_rate`).

Why one module past 400 lines: it is one server whose routes, fault injection and request
log share state under one lock; what the model and judge "think" is already apart
(`tokenlens.testing.fake_logic`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tokenlens.testing import fake_logic
from tokenlens.testing.prompt_cache import PromptCache
from tokenlens.tokens import estimate_tokens

#: Faults `inject` understands. HTTP faults hit the next request(s) to any /v1/ path;
#: "bad_json" hits the next judge (structured-output) call only.
HTTP_FAULTS: dict[str, tuple[int, str]] = {
    "429": (429, "rate_limit_error"),
    "529": (529, "overloaded_error"),
    "500": (500, "api_error"),
    "503": (503, "api_error"),
    "400": (400, "invalid_request_error"),
    "401": (401, "authentication_error"),
    "403": (403, "permission_error"),
    "404": (404, "not_found_error"),
    "spend_limit": (429, "rate_limit_error"),
}
FAULTS = (*HTTP_FAULTS, "stall", "bad_json")
BAD_JSON_TEXT = 'Sure! Here is my verdict: answer A is better, grade_a = 80 and grade_b = "high"'
_REDACTED_HEADERS = frozenset({"x-api-key", "authorization", "cookie", "proxy-authorization"})


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (key values redacted)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    timestamp: float
    status: int
    fault: str | None = None
    #: When a /v1/messages request arrived (`timestamp` is when its response left).
    received: float | None = None

    @property
    def is_judge(self) -> bool:
        return isinstance(self.body, dict) and fake_logic.structured_schema(self.body) is not None


@dataclass
class _Fault:
    kind: str
    remaining: int
    retry_after: float


@dataclass
class _Batch:
    id: str
    requests: list[dict[str, Any]]
    created_at: datetime
    polls: int = 0
    ended_at: datetime | None = None
    results: list[dict[str, Any]] = field(default_factory=list)


class FakeAnthropic:
    """The loopback server. Use as a context manager, or `start()` / `stop()`.

    Args:
        seed: seeds every sampled answer, judge noise and random fault.
        latency_s: every /v1/ response leaves this long after its request arrived (bench:
            0.2). A message is made during that wait, as a remote API's would be, so the
            fake's own CPU (a judge reply is graded here, milliseconds a call, one call
            after another on one event loop) is not charged to the client as latency.
        stream_delay_s: delay between SSE events.
        stall_s: how long a "stall" fault holds the response (longer than client timeouts).
        judge_noise: standard deviation of the fake judge's Gaussian noise, in grade points.
        batch_polls: retrieves before a batch reports `ended`.
        require_key: answer 401 when a request carries neither x-api-key nor authorization.
        fault_rate: share of /v1/ requests failed at random (see `set_fault_rate`).
        fault_kinds: the HTTP faults drawn from when `fault_rate` > 0.
        forget_rate: share of answers saying the context lacks the information (a model
            that got worse; see `fake_logic.fake_answer`).
        port: loopback port to bind (0: the OS picks a free one).
        keep_requests: how many recent requests the log keeps (None: all).
        prompt_cache: report cache reads and writes as the provider would
            (`tokenlens.testing.prompt_cache`); off, every usage says 0 cached tokens.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        latency_s: float = 0.0,
        stream_delay_s: float = 0.0,
        stall_s: float = 10.0,
        judge_noise: float = 4.0,
        batch_polls: int = 1,
        require_key: bool = True,
        fault_rate: float = 0.0,
        fault_kinds: Iterable[str] = ("429", "529", "500"),
        forget_rate: float = 0.0,
        port: int = 0,
        keep_requests: int | None = None,
        prompt_cache: bool = False,
    ) -> None:
        self.seed = seed
        self.forget_rate = forget_rate
        self.latency_s = latency_s
        self.stream_delay_s = stream_delay_s
        self._streams_held: threading.Event | None = None
        self.stall_s = stall_s
        self.judge_noise = judge_noise
        self.batch_polls = batch_polls
        self.require_key = require_key
        self.prompt_cache = prompt_cache
        self.cache = PromptCache()
        self._lock = threading.Lock()
        #: The most recent requests kept (None: all; a long-running `tokenlens fake-upstream`
        #: keeps a bounded window).
        self._requests: deque[RecordedRequest] = deque(maxlen=keep_requests)
        self._faults: list[_Fault] = []
        self._seen: dict[str, int] = {}
        self._batches: dict[str, _Batch] = {}
        self._batch_outcomes: dict[str, str] = {}
        self._fault_rate = 0.0
        self._fault_kinds: tuple[str, ...] = ("429", "529", "500")
        self._fault_rng = random.Random(seed)
        if fault_rate:
            self.set_fault_rate(fault_rate, kinds=fault_kinds)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._held = 0  # requests a "stall" fault holds right now (recorded when it ends)
        #: The port asked for (0: the OS picks a free one; `port` is then the one bound).
        self.port = port
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/messages/batches", self._batch_create, methods=["POST"]),
                Route("/v1/messages/batches/{batch_id}", self._batch_retrieve, methods=["GET"]),
                Route(
                    "/v1/messages/batches/{batch_id}/results", self._batch_results, methods=["GET"]
                ),
            ]
        )

    # --- lifecycle ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _server_config(self) -> uvicorn.Config:
        return uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=1,
        )

    def serve_forever(self) -> None:
        """Serve in this thread on `port` until SIGINT or SIGTERM (uvicorn handles both and
        shuts down gracefully): `tokenlens fake-upstream`."""
        server = uvicorn.Server(self._server_config())
        self._server = server
        try:
            server.run()
        finally:
            self._server = None
        if not server.started:
            raise OSError(f"the fake Anthropic server could not listen on 127.0.0.1:{self.port}")

    def start(self) -> FakeAnthropic:
        """Serve on the loopback port (0: the OS picks one) in a daemon thread until `stop()`."""
        server = uvicorn.Server(self._server_config())
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(target=server.run, name="fake-anthropic", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("fake Anthropic server did not start")
            time.sleep(0.01)
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- control --------------------------------------------------------------------

    def inject(self, fault: str, times: int = 1, *, retry_after: float = 0.0) -> None:
        """Queue `fault` for the next `times` matching requests (see `FAULTS`)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        with self._lock:
            self._faults.append(_Fault(fault, times, retry_after))

    def set_fault_rate(
        self, rate: float, *, kinds: Iterable[str] = ("429", "529", "500"), seed: int | None = None
    ) -> None:
        """Fail a seeded random share `rate` of /v1/ requests with one of `kinds`."""
        kinds = tuple(kinds)
        if not 0.0 <= rate <= 1.0 or not kinds or any(k not in HTTP_FAULTS for k in kinds):
            raise ValueError(f"bad random faults: rate={rate}, kinds={kinds}")
        with self._lock:
            self._fault_rate = rate
            self._fault_kinds = kinds
            self._fault_rng = random.Random(self.seed if seed is None else seed)

    @property
    def fault_rate(self) -> float:
        return self._fault_rate

    def fail_batch_entry(self, custom_id: str, outcome: str) -> None:
        """Make the batch entry `custom_id` end as "errored" or "expired"."""
        if outcome not in ("errored", "expired"):
            raise ValueError(f"outcome must be 'errored' or 'expired', not {outcome!r}")
        with self._lock:
            self._batch_outcomes[custom_id] = outcome

    _SETTINGS = (
        "seed",
        "latency_s",
        "stream_delay_s",
        "stall_s",
        "judge_noise",
        "batch_polls",
        "require_key",
        "forget_rate",
        "prompt_cache",
    )

    def settings(self) -> dict[str, Any]:
        """The tunable settings (see the constructor), to restore later with `configure`."""
        return {name: getattr(self, name) for name in self._SETTINGS}

    def configure(self, **settings: Any) -> None:
        """Change tunable settings while running (e.g. `latency_s=0.2` for a bench)."""
        unknown = set(settings) - set(self._SETTINGS)
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
        for name, value in settings.items():
            setattr(self, name, value)

    def hold_streams(self, until: threading.Event | None) -> None:
        """Hold every stream after its first event until `until` is set (None: never hold).

        A test that a relay passes events on one by one sets it once its client has read
        the first event: a relay that buffered the stream would wait forever instead."""
        self._streams_held = until

    def reset(self) -> None:
        """Forget recorded requests, queued and random faults, sampling history and holds."""
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._seen.clear()
            self._batch_outcomes.clear()
            self.cache.clear()
            self._fault_rate = 0.0
            self._fault_rng = random.Random(self.seed)
        self._streams_held = None

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received since the last reset, in arrival order."""
        with self._lock:
            return list(self._requests)

    def calls(self, path: str = "/v1/messages", method: str = "POST") -> list[RecordedRequest]:
        """Recorded requests to exactly `path` with `method`."""
        return [r for r in self.requests if r.path == path and r.method == method]

    # --- plumbing -------------------------------------------------------------------

    def _record(
        self,
        request: Request,
        body: Any,
        status: int,
        fault: str | None = None,
        received: float | None = None,
    ) -> None:
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _REDACTED_HEADERS else v)
            for k, v in request.headers.items()
        }
        entry = RecordedRequest(
            method=request.method,
            path=request.url.path,
            query=request.url.query,
            headers=headers,
            body=body,
            timestamp=time.time(),
            status=status,
            fault=fault,
            received=received,
        )
        with self._lock:
            self._requests.append(entry)

    def _take_fault(self, is_judge: bool) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.kind == "bad_json" and not is_judge:
                    continue
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
            if self._fault_rate and self._fault_rng.random() < self._fault_rate:
                return _Fault(self._fault_rng.choice(self._fault_kinds), 1, 0.0)
        return None

    def _rng(self, body: Any) -> random.Random:
        """Seeded by (server seed, request hash, how often this exact request was seen)."""
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self._lock:
            seen = self._seen.get(digest, 0)
            self._seen[digest] = seen + 1
        return random.Random(f"{self.seed}:{digest}:{seen}")

    def held(self) -> int:
        """How many requests a "stall" fault holds right now. A request is recorded only
        when it ends, so this is how a test sees that its client is stuck on one."""
        with self._lock:
            return self._held

    async def _stall(self, request: Request) -> None:
        deadline = time.monotonic() + self.stall_s
        with self._lock:
            self._held += 1
        try:
            while time.monotonic() < deadline and not self._stopping.is_set():
                await asyncio.sleep(0.05)
                if await request.is_disconnected():
                    return
        finally:
            with self._lock:
                self._held -= 1

    async def _prelude(
        self, request: Request, arrived: float | None = None
    ) -> tuple[Any, Response | None, str | None]:
        """Parse, authenticate, delay and apply faults; a Response here ends the request.

        A caller that passes `arrived` (its request's `time.monotonic()`) makes its
        response first and then awaits `_until_due(arrived)`; only a fault's response
        waits here."""
        start = time.monotonic() if arrived is None else arrived
        raw = await request.body()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                return None, _error(400, "invalid_request_error", "body is not JSON"), None
        if self.require_key and not (
            request.headers.get("x-api-key") or request.headers.get("authorization")
        ):
            return body, _error(401, "authentication_error", "x-api-key header is required"), None
        if arrived is None:
            await self._until_due(start)
        is_judge = isinstance(body, dict) and fake_logic.structured_schema(body) is not None
        fault = self._take_fault(is_judge and request.url.path == "/v1/messages")
        if fault is None or fault.kind == "bad_json":
            return body, None, fault.kind if fault else None
        if arrived is not None:
            await self._until_due(start)
        if fault.kind == "stall":
            await self._stall(request)
            return body, _error(504, "timeout_error", "stalled response (injected)"), "stall"
        status, kind = HTTP_FAULTS[fault.kind]
        headers = {"retry-after": f"{fault.retry_after:g}"} if status == 429 else {}
        details = (
            {"error_code": "enforced_spend_limit_reached"} if fault.kind == "spend_limit" else None
        )
        return body, _error(status, kind, f"injected {fault.kind}", headers, details), fault.kind

    # --- endpoints ------------------------------------------------------------------

    async def _until_due(self, arrived: float) -> None:
        """Wait until `latency_s` has passed since the request `arrived`."""
        if self.latency_s:
            await asyncio.sleep(max(0.0, arrived + self.latency_s - time.monotonic()))

    async def _messages(self, request: Request) -> Response:
        arrived, received = time.monotonic(), time.time()
        body, early, fault = await self._prelude(request, arrived)
        if early is not None:
            self._record(request, body, early.status_code, fault, received)
            return early
        problem = _validate_messages_body(body)
        message = None if problem else self._message(body, bad_json=fault == "bad_json")
        await self._until_due(arrived)
        if message is None:
            self._record(request, body, 400, received=received)
            return _error(400, "invalid_request_error", str(problem))
        self._record(request, body, 200, fault, received)
        if body.get("stream"):
            return StreamingResponse(
                self._sse(message),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "request-id": f"req_{uuid.uuid4().hex}"},
            )
        return JSONResponse(message, headers={"request-id": f"req_{uuid.uuid4().hex}"})

    def _message(self, body: dict[str, Any], *, bad_json: bool = False) -> dict[str, Any]:
        """The Message object the fake model returns for a request body."""
        rng = self._rng(body)
        tool = fake_logic.forced_tool(body)
        schema = fake_logic.structured_schema(body)
        stop_reason = "end_turn"
        content: list[dict[str, Any]]
        if schema is not None and not bad_json:
            obj = fake_logic.structured_reply(body, rng, self.judge_noise)
            text = json.dumps(obj)
            if tool is not None:
                content = [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{uuid.uuid4().hex[:24]}",
                        "name": tool["name"],
                        "input": obj,
                    }
                ]
                stop_reason = "tool_use"
            else:
                content = [{"type": "text", "text": text}]
        else:
            text = (
                BAD_JSON_TEXT if bad_json else fake_logic.fake_answer(body, rng, self.forget_rate)
            )
            text, cut = fake_logic.truncate_to_tokens(text, int(body["max_tokens"]))
            stop_reason = "max_tokens" if cut else "end_turn"
            content = [{"type": "text", "text": text}]
        uncached, read, write = fake_logic.input_tokens(body), 0, 0
        if self.prompt_cache:
            read, write, _ = self.cache.lookup(body)
            uncached = max(0, uncached - read - write)
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": uncached,
                "output_tokens": max(1, estimate_tokens(text)),
                "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read,
            },
        }

    async def _sse(self, message: dict[str, Any]) -> AsyncIterator[bytes]:
        start = {**message, "content": [], "stop_reason": None}
        start["usage"] = {**message["usage"], "output_tokens": 1}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                empty: dict[str, Any] = {"type": "text", "text": ""}
                pieces = _chunks(block["text"])
                deltas = [{"type": "text_delta", "text": p} for p in pieces]
            else:
                empty = {**block, "input": {}}
                pieces = _chunks(json.dumps(block["input"]))
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": empty},
                )
            )
            if index == 0:
                events.append(("ping", {"type": "ping"}))
            events += [
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                for d in deltas
            ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        for number, (name, data) in enumerate(events):
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            held = self._streams_held
            while number == 0 and held is not None and not held.is_set():
                await asyncio.sleep(0.01)
            if self.stream_delay_s:
                await asyncio.sleep(self.stream_delay_s)

    async def _count_tokens(self, request: Request) -> Response:
        body, early, fault = await self._prelude(request)
        if early is not None:
            self._record(request, body, early.status_code, fault)
            return early
        if not isinstance(body, dict) or not body.get("messages") or not body.get("model"):
            self._record(request, body, 400)
            return _error(400, "invalid_request_error", "model and messages are required")
        self._record(request, body, 200)
        return JSONResponse({"input_tokens": fake_logic.input_tokens(body)})

    async def _batch_create(self, request: Request) -> Response:
        body, early, fault = await self._prelude(request)
        if early is not None:
            self._record(request, body, early.status_code, fault)
            return early
        entries = body.get("requests") if isinstance(body, dict) else None
        problem = "requests must be a non-empty list" if not entries else None
        for i, entry in enumerate(entries or []):
            problem = problem or (
                f"requests[{i}]: custom_id is required"
                if not entry.get("custom_id")
                else _validate_messages_body(entry.get("params"))
            )
        if problem:
            self._record(request, body, 400)
            return _error(400, "invalid_request_error", problem)
        batch = _Batch(f"msgbatch_{uuid.uuid4().hex[:24]}", list(entries or []), datetime.now(UTC))
        with self._lock:
            self._batches[batch.id] = batch
        self._record(request, body, 200)
        return JSONResponse(self._batch_json(batch))

    async def _batch_retrieve(self, request: Request) -> Response:
        body, early, fault = await self._prelude(request)
        if early is not None:
            self._record(request, body, early.status_code, fault)
            return early
        batch = self._batches.get(request.path_params["batch_id"])
        if batch is None:
            self._record(request, body, 404)
            return _error(404, "not_found_error", "no such batch")
        batch.polls += 1
        if batch.ended_at is None and batch.polls >= self.batch_polls:
            self._finish(batch)
        self._record(request, body, 200)
        return JSONResponse(self._batch_json(batch))

    async def _batch_results(self, request: Request) -> Response:
        body, early, fault = await self._prelude(request)
        if early is not None:
            self._record(request, body, early.status_code, fault)
            return early
        batch = self._batches.get(request.path_params["batch_id"])
        if batch is None or batch.ended_at is None:
            self._record(request, body, 404)
            return _error(404, "not_found_error", "batch results are not available yet")
        self._record(request, body, 200)
        lines = "".join(json.dumps(r) + "\n" for r in batch.results)
        return Response(lines, media_type="application/x-jsonl")

    def _finish(self, batch: _Batch) -> None:
        for entry in batch.requests:
            with self._lock:
                outcome = self._batch_outcomes.get(entry["custom_id"], "succeeded")
            if outcome == "errored":
                result: dict[str, Any] = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": "api_error", "message": "injected batch error"},
                    },
                }
            elif outcome == "expired":
                result = {"type": "expired"}
            else:
                result = {"type": "succeeded", "message": self._message(entry["params"])}
            batch.results.append({"custom_id": entry["custom_id"], "result": result})
        batch.ended_at = datetime.now(UTC)

    def _batch_json(self, batch: _Batch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if batch.ended_at is None:
            counts["processing"] = len(batch.requests)
        for result in batch.results:
            counts[result["result"]["type"]] += 1
        ended = batch.ended_at is not None
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": batch.created_at.isoformat(),
            "expires_at": (batch.created_at + timedelta(hours=24)).isoformat(),
            "ended_at": batch.ended_at.isoformat() if batch.ended_at else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": (
                f"{self.base_url}/v1/messages/batches/{batch.id}/results" if ended else None
            ),
        }


def _chunks(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _error(
    status: int,
    kind: str,
    message: str,
    headers: dict[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> JSONResponse:
    error: dict[str, Any] = {"type": kind, "message": message}
    if details:
        error["details"] = details
    return JSONResponse(
        {"type": "error", "error": error},
        status_code=status,
        headers={"request-id": f"req_{uuid.uuid4().hex}", **(headers or {})},
    )


def _validate_messages_body(body: Any) -> str | None:
    """The first problem with a Messages API body, as the API would word it, or None."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: at least one message is required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: must be a positive integer"
    temperature = body.get("temperature", 1.0)
    if not isinstance(temperature, int | float) or not 0.0 <= temperature <= 1.0:
        return "temperature: must be between 0 and 1"
    if not body.get("tools") and _has_tool_blocks(body["messages"]):
        return "Requests which include `tool_use` or `tool_result` blocks must define tools."
    return None


def _has_tool_blocks(messages: list[Any]) -> bool:
    return any(
        isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )

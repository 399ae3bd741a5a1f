"""Opt-in capture of live traffic, for `tokenlens tasks harvest` (`serve --capture`).

The request path pays one sampling draw and, for a sampled request, a tee: the bytes the
client sent and the bytes relayed back are kept by reference as they pass (`Capture.serve`), and
when the answer is done the pair goes to a bounded queue with `put_nowait`. A full queue
drops the capture and counts it; it never blocks or fails a request. Everything else
happens in one writer thread: parsing, the class when the proxy decided none, the
answer's text, redaction (`tokenlens.proxy.redact`), serialisation, and appending to part
files under the store (`tokenlens.proxy.capture_store`; `tokenlens.captures` holds the
record schema). Local part files are created 0600 in a 0700 folder; an fsspec URL (e.g.
``s3://bucket/captures``) gets whole part files uploaded when they rotate. Nothing of a
capture is ever logged: the log gets counts and exception types.

What is captured for a sampled ``POST /v1/messages``: the body as received (before any
compression); the class the proxy chose and how (the handler leaves its `classify`
result in the ASGI scope under `DECISION_KEY`; with no policy the proxy classifies
nothing, and the writer runs the same rules over the starter set's class names); the
model; the arm applied (the proxy's own ``x-tokenlens-arm`` response header); and the
answer's text when it answered the original body (arm ``none``). For a body the shadow
judge replayed uncompressed, `replay_answer` adds the replay's answer as a second line.
A client excludes a request with ``x-tokenlens-capture: off``.

Why a tee at the ASGI boundary rather than hooks in the relay: the relay's code stays as
it is, and what is captured is by construction exactly what crossed the wire.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import queue
import random
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from tokenlens.captures import CAPTURE_SCHEMA_VERSION, body_digest
from tokenlens.classifier.classify import CLASS_HEADER, Classification, classify
from tokenlens.proxy import relay
from tokenlens.proxy.capture_store import open_parts
from tokenlens.proxy.redact import Redactor
from tokenlens.tasks import KNOWN_CLASSES

log = logging.getLogger("tokenlens.proxy.capture")

CAPTURE_HEADER = b"x-tokenlens-capture"
#: Where the handler leaves its `Classification` of a Messages request in the ASGI scope.
DECISION_KEY = "tokenlens.classification"
CAPTURE_WARNING = (
    "CAPTURE IS ON: {sample:.0%} OF MESSAGES REQUESTS AND THEIR ANSWERS ARE WRITTEN, "
    "REDACTED, TO {store} (files 0600). Applications opt a request out with the header "
    "x-tokenlens-capture: off."
)
DEFAULT_SAMPLE = 0.02
DEFAULT_QUEUE = 1024
#: Records per part file; a part is also closed when it is this many seconds old.
PART_RECORDS = 1000
PART_SECONDS = 60.0
#: Bodies (either way) larger than this are not captured (the relay still serves them).
MAX_CAPTURE_BYTES = 4 * 1024 * 1024
_CLASS_HEADER = CLASS_HEADER.encode()
_ARM_HEADER = b"x-tokenlens-arm"
#: Replay answers waiting for their request's line (bounded; never written unmatched).
_PENDING_REPLAYS = 256
_RECENT_DIGESTS = 4096
_STOP = object()

Call = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class _Exchange:
    """One sampled request and its answer, as raw bytes (parsed later, in the writer)."""

    time: float
    header_class: str | None
    request: list[bytes] = field(default_factory=list)
    response: list[bytes] = field(default_factory=list)
    size: int = 0
    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    complete: bool = False
    too_large: bool = False
    decision: Classification | None = None


@dataclass(frozen=True)
class _Replay:
    body: dict[str, Any]
    answer: str
    time: float


class Capture:
    """The capture of one proxy process: sampling on the request path, one writer thread."""

    def __init__(
        self,
        store: str,
        *,
        sample: float = DEFAULT_SAMPLE,
        redactor: Redactor | None = None,
        queue_size: int = DEFAULT_QUEUE,
        part_records: int = PART_RECORDS,
        part_seconds: float = PART_SECONDS,
        seed: int | None = None,
    ) -> None:
        self.store = store
        self.sample = sample
        self.redactor = redactor or Redactor()
        self.counts: Counter[str] = Counter()
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._rng = random.Random(seed)
        self._sink = open_parts(store, part_records, part_seconds)
        self._thread = threading.Thread(target=self._run, name="tokenlens-capture", daemon=True)
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._pending: OrderedDict[str, _Replay] = OrderedDict()

    # --- the request path (event loop) -----------------------------------------------

    async def serve(self, call: Call, scope: Scope, receive: Receive, send: Send) -> None:
        """Run `call` for one relayed request, teeing it when it is sampled."""
        exchange = self._sampled(scope)
        if exchange is None:
            await call(scope, receive, send)
            return

        async def tee_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not exchange.too_large:
                chunk = message.get("body", b"")
                exchange.size += len(chunk)
                if exchange.size > MAX_CAPTURE_BYTES:
                    exchange.too_large, exchange.request = True, []
                elif chunk:
                    exchange.request.append(chunk)
            return message

        async def tee_send(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.body":
                chunk = message.get("body", b"")
                if chunk and not exchange.too_large:
                    exchange.size += len(chunk)
                    if exchange.size > MAX_CAPTURE_BYTES:
                        exchange.too_large, exchange.response = True, []
                    else:
                        exchange.response.append(chunk)
                if not message.get("more_body", False):
                    exchange.complete = True
            elif kind == "http.response.start":
                exchange.status = message["status"]
                exchange.headers = list(message.get("headers", ()))
            await send(message)

        try:
            await call(scope, tee_receive, tee_send)
        finally:
            exchange.decision = scope.get(DECISION_KEY)
            self._offer(exchange)

    def _sampled(self, scope: Scope) -> _Exchange | None:
        if scope["method"] != "POST" or scope["path"] != "/v1/messages":
            return None
        header_class = None
        for name, value in scope["headers"]:
            if name == CAPTURE_HEADER and value.strip().lower() == b"off":
                self.counts["excluded"] += 1
                return None
            if name == _CLASS_HEADER:
                header_class = value.decode("latin-1")
        if self.sample < 1.0 and self._rng.random() >= self.sample:
            return None
        return _Exchange(time=time.time(), header_class=header_class)

    def _offer(self, item: object) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.counts["dropped_queue_full"] += 1

    def replay_answer(self, body: dict[str, Any], answer: str) -> None:
        """The shadow judge's uncompressed answer to `body` (kept only if `body` was captured)."""
        self._offer(_Replay(body, answer, time.time()))

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, close the part file, stop the thread (blocking: call it
        from a worker thread)."""
        if self._thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=timeout)
            self._thread.join(timeout)
        log.info(
            "capture: %d requests written, %d replay answers, %d dropped (queue full), "
            "%d skipped, %d opted out",
            self.counts["written"],
            self.counts["replays"],
            self.counts["dropped_queue_full"],
            sum(v for k, v in self.counts.items() if k.startswith("skipped")),
            self.counts["excluded"],
        )

    # --- the writer thread -----------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=1.0)
            except queue.Empty:
                self._guard(self._sink.tick)
                continue
            if item is _STOP:
                break
            self._guard(functools.partial(self._write, item))
        self._guard(self._sink.close)

    def _guard(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # the writer outlives any bad record; never its content
            self.counts["errors"] += 1
            log.warning("capture writer failed (%s)", type(exc).__name__)

    def _write(self, item: object) -> None:
        if isinstance(item, _Exchange):
            record = self._request_record(item)
            if record is None:
                return
            self._sink.write(record)
            self.counts["written"] += 1
            digest = record["body_sha256"]
            self._recent[digest] = None
            if len(self._recent) > _RECENT_DIGESTS:
                self._recent.popitem(last=False)
            replay = self._pending.pop(digest, None)
            if replay is not None:
                self._write_replay(digest, replay)
        elif isinstance(item, _Replay):
            digest = body_digest(self.redactor.request(item.body))
            if digest in self._recent:
                self._write_replay(digest, item)
            else:  # its request's line may still be queued behind it
                self._pending[digest] = item
                if len(self._pending) > _PENDING_REPLAYS:
                    self._pending.popitem(last=False)

    def _write_replay(self, digest: str, replay: _Replay) -> None:
        answer = self.redactor.text(replay.answer)
        if not answer.strip():
            return
        self._sink.write(
            {
                "kind": "replay",
                "v": CAPTURE_SCHEMA_VERSION,
                "time": replay.time,
                "body_sha256": digest,
                "answer": answer,
            }
        )
        self.counts["replays"] += 1

    def _request_record(self, ex: _Exchange) -> dict[str, Any] | None:
        if ex.too_large:
            self.counts["skipped_too_large"] += 1
            return None
        try:
            body = json.loads(b"".join(ex.request))
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            self.counts["skipped_not_json"] += 1
            return None
        if ex.decision is not None:
            found, decided_by = ex.decision, "proxy"
        else:  # no policy: the proxy classified nothing; the same rules, for the record
            header = (ex.header_class or "").strip().lower()
            found = classify(body, ex.header_class, {*KNOWN_CLASSES, header})
            decided_by = "capture"
        arm = "none"
        content_type = encoding = ""
        for name, value in ex.headers:
            if name == _ARM_HEADER:
                arm = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"content-encoding":
                encoding = value.decode("latin-1")
        answer = None
        if ex.complete and ex.status == 200 and arm == "none":
            answer = _answer_text(ex.response, content_type, encoding)
        redacted = self.redactor.request(body)
        model = redacted.get("model")  # the redacted one: a model name, or redacted text
        return {
            "kind": "request",
            "v": CAPTURE_SCHEMA_VERSION,
            "time": ex.time,
            "body_sha256": body_digest(redacted),
            "model": model if isinstance(model, str) else "",
            "task_class": found.task_class,
            "class_source": found.source,
            "class_decided_by": decided_by,
            "arm": arm,
            "body": redacted,
            "answer": self.redactor.text(answer) if answer else None,
        }


def _answer_text(chunks: list[bytes], content_type: str, encoding: str) -> str | None:
    """The answer's text from the relayed bytes (SSE text deltas, or the message JSON)."""
    if "text/event-stream" in content_type:
        if encoding and encoding != "identity":
            return None
        tap = relay.SseTap(capture_text=True)
        for chunk in chunks:
            tap.feed(chunk)
        return tap.text if tap.complete and tap.text else None
    decoded = relay.decode_body(b"".join(chunks), encoding or None)
    message = relay.parse_message(decoded) if decoded is not None else None
    return relay.message_text(message) or None if message is not None else None

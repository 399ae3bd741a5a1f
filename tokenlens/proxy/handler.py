"""The request path: read, decide, compress (or not), forward, relay back.

Hot path rules: without a policy or `--compress` the body is forwarded as the exact
bytes received, unparsed. Any failure of ours (a codec crash, a slow arm, a body we
cannot re-encode, an upstream that rejects the compressed body) forwards the original
instead and counts a fail-open. Nothing of a prompt or a key is ever logged: log lines
carry classes, arms, statuses and exception *types* only.

Towards the upstream the proxy behaves as the upstream would towards its client: a
client that leaves cancels the upstream call (`relay.ClientWatch`), and an upstream
answer that breaks off reaches the client broken, never cleanly ended (`relay.StreamRelay`).

Why one module past 400 lines: the request's story (read, plan, forward, relay, follow
up) reads top-down in one place; the wire-level pieces live in `relay`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tokenlens.classifier.classify import CLASS_HEADER, classify
from tokenlens.compress.arms import Arm
from tokenlens.proxy import relay
from tokenlens.proxy.apply import (
    CONTROL_ARM,
    Compressor,
    choose_arm,
    compress_within,
    tool_arms_for,
)
from tokenlens.proxy.background import BackgroundWork
from tokenlens.proxy.capture import DECISION_KEY
from tokenlens.proxy.metrics import ProxyMetrics
from tokenlens.proxy.observe import Observation, Observer
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.proxy.settings import ProxySettings
from tokenlens.proxy.shadow import ShadowJudge
from tokenlens.proxy.stats import ProxyStats
from tokenlens.proxy.upstream import TIMEOUT_ERRORS, UPSTREAM_ERRORS

log = logging.getLogger("tokenlens.proxy")

MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
#: A count_tokens call that failed in any of these ways is a measure failure, not a crash.
_MEASURE_ERRORS: tuple[type[BaseException], ...] = (*UPSTREAM_ERRORS, ValueError, AttributeError)
_STATUS_CLASS = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}
#: What the relay answers with: a whole response, or a body relayed as it arrives.
Reply = Response | relay.BufferedReply | relay.StreamRelay


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


@dataclass
class Plan:
    """What to send upstream for one Messages request, and what to do afterwards."""

    content: bytes
    task_class: str | None = None
    arm: Arm | None = None
    compressed: bool = False
    original: dict[str, Any] | None = None
    sent_body: dict[str, Any] | None = None
    bar: float | None = None
    judge: bool = False
    extra_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    #: Credentials for our own calls about this request (count_tokens, shadow replay).
    call_headers: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> str:
        body = self.original or {}
        model = body.get("model")
        return model if isinstance(model, str) else ""


async def read_bounded(request: Request, limit: int) -> tuple[bytes, AsyncIterator[bytes] | None]:
    """The body if it fits in `limit` bytes; else what was read plus the rest, unread."""
    stream = request.stream()
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"", _chain(chunks, stream)
    return b"".join(chunks), None


async def _chain(head: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for chunk in head:
        yield chunk
    async for chunk in rest:
        yield chunk


async def _client_body(
    body: AsyncIterator[bytes], watch: relay.ClientWatch
) -> AsyncIterator[bytes]:
    """The rest of a client's body as it streams upstream; the watch starts at its end.

    A client that leaves mid-body breaks the upstream request too (aiohttp reports it as
    its own connection error): `watch.gone` tells that apart from an upstream failure."""
    try:
        async for chunk in body:
            yield chunk
    except ClientDisconnect:
        watch.gone = True
        raise
    watch.start()


def _has_body(request: Request) -> bool:
    headers = request.headers
    return "transfer-encoding" in headers or headers.get("content-length", "0") != "0"


class Handler:
    """The relay endpoint: every path that is not the dashboard."""

    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self.upstream = state.settings.upstream_base

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one relayed request as a bare ASGI call (no router on the hot path)."""
        watch = relay.ClientWatch(receive, scope)
        obs = Observation(route_kind(scope["path"]), scope["method"])
        status = 499
        try:
            response = await self(Request(scope, receive), watch, obs)
            status = response.status_code
            await response(scope, receive, send)
        except asyncio.CancelledError:
            if not watch.gone:
                raise
            # The client left: its request (and any upstream call for it) was cancelled.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.state.stats.client_gone += 1
            status = 499
            log.debug("client left; upstream request cancelled")
        finally:
            watch.stop()
            # metrics and access log, once the answer has been sent (or broken off)
            self.state.observer.finish(obs, status)

    async def __call__(
        self, request: Request, watch: relay.ClientWatch, obs: Observation | None = None
    ) -> Reply:
        stats = self.state.stats
        path = request.scope["path"]
        obs = obs or Observation(route_kind(path), request.method)
        try:
            if request.method == "POST" and path == MESSAGES_PATH:
                stats.requests["messages"] += 1
                return await self._messages(request, watch, obs)
            stats.requests[route_kind(path)] += 1
            streamed = _has_body(request)
            content: bytes | AsyncIterator[bytes] = b""
            if streamed:
                content = _client_body(request.stream(), watch)
            else:
                watch.start()
            return await self._forward(
                request, content, keep_length=streamed, plan=None, watch=watch, obs=obs
            )
        except ClientDisconnect:  # left while sending its body (any upstream call is dropped)
            stats.client_gone += 1
            obs.pass_through("client_disconnect")
            log.debug("client left mid-body")
            return Response(status_code=499)
        except Exception as exc:  # never a traceback: exception text may quote the prompt
            log.error("proxy error on %s (%s)", route_kind(path), type(exc).__name__)
            obs.outcome, obs.reason = "proxy_error", f"error:{type(exc).__name__}"
            return relay.error_response(
                502, "api_error", f"tokenlens proxy error ({type(exc).__name__})"
            )

    # --- Messages -----------------------------------------------------------------

    async def _messages(
        self, request: Request, watch: relay.ClientWatch, obs: Observation
    ) -> Reply:
        settings = self.state.settings
        body, rest = await read_bounded(request, settings.max_body_bytes)
        if rest is not None:
            self.state.stats.passthrough["too_large"] += 1
            obs.pass_through("too_large")
            content = _client_body(rest, watch)
            return await self._forward(
                request, content, keep_length=True, plan=None, watch=watch, obs=obs
            )
        watch.start()
        if not self.state.compressing:
            obs.pass_through("no_policy")
            return await self._forward(
                request, body, keep_length=False, plan=None, watch=watch, obs=obs
            )
        try:
            plan = await self._plan(request, body, obs)
        except Exception as exc:  # whatever broke in our codec path: send what the client sent
            reason = f"error:{type(exc).__name__}"
            self.state.stats.fail_opens[reason] += 1
            obs.fail_open(reason)
            log.warning("compression path failed (%s); forwarding the original", type(exc).__name__)
            plan = Plan(content=body)
        response = await self._forward(
            request, plan.content, keep_length=False, plan=plan, watch=watch, obs=obs
        )
        if plan.compressed and response.status_code == 400:
            # The upstream refused what we made of the request: send what the client sent.
            self.state.stats.fail_opens["upstream_rejected"] += 1
            obs.fail_open("upstream_rejected")
            log.warning(
                "upstream rejected a compressed body (arm %s); resending original",
                plan.arm.key if plan.arm else "?",
            )
            if isinstance(response, relay.StreamRelay):
                await response.aclose()
            fallback = Plan(content=body, task_class=plan.task_class, original=plan.original)
            fallback.extra_headers = _tag(plan.task_class, None)
            watch.start()  # again: reading the refusal whole stopped it
            return await self._forward(
                request, body, keep_length=False, plan=fallback, watch=watch, obs=obs
            )
        return response

    async def _plan(self, request: Request, raw: bytes, obs: Observation) -> Plan:
        state = self.state
        settings = state.settings
        stats = state.stats
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            stats.passthrough["not_json"] += 1
            obs.pass_through("not_json")
            return Plan(content=raw)
        policy = state.store.policy if state.store is not None else None
        known = policy.classes.keys() if policy is not None else ()
        shipped = policy.classifier if policy is not None else None
        found = classify(parsed, request.headers.get(CLASS_HEADER), known, shipped)
        task_class = found.task_class
        request.scope[DECISION_KEY] = found  # for the capture, when on
        class_stats = stats.for_class(task_class)
        choice = choose_arm(
            policy,
            task_class,
            override=settings.override_arm,
            allow_provisional=settings.allow_provisional,
            fallen_back=class_stats.fallback_reason is not None,
        )
        arm = choice.arm
        stats.record_decision(task_class, found.source, arm.key if arm else None)
        obs.task_class, obs.decided_by, obs.arm = (
            task_class,
            found.source,
            arm.key if arm else "none",
        )
        plan = Plan(content=raw, task_class=task_class, original=parsed)
        obs.model = plan.model
        plan.extra_headers = _tag(task_class, None)
        if policy is not None:
            entry = policy.entry_for(task_class)
            plan.bar = entry.bar if entry.bar is not None else policy.tolerance
        tool_arms = tool_arms_for(policy, settings)
        if arm is None and not tool_arms:
            stats.passthrough["no_arm"] += 1
            obs.pass_through("no_arm")
            return plan
        outcome = await compress_within(
            state.compressor,
            parsed,
            arm or CONTROL_ARM,
            settings.compress_budget_ms,
            tool_arms=tool_arms,
        )
        obs.compress_ms = outcome.elapsed_ms
        result = outcome.result
        if outcome.fail_open is not None or result is None:
            stats.fail_opens[outcome.fail_open or "error"] += 1
            obs.fail_open(outcome.fail_open or "error")
            return plan
        if not getattr(result, "rewritten", True) or (
            result.compressed_tokens >= result.original_tokens
        ):
            stats.passthrough["no_gain"] += 1
            obs.pass_through("no_gain")
            return plan
        try:
            content = json.dumps(result.body, ensure_ascii=False, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            stats.fail_opens[f"error:{type(exc).__name__}"] += 1
            obs.fail_open(f"error:{type(exc).__name__}")
            return plan
        stats.record_compression(
            task_class,
            plan.model,
            result.original_tokens,
            result.compressed_tokens,
            outcome.elapsed_ms,
        )
        tool_saved = getattr(result, "tool_tokens_saved", None)
        if tool_saved is not None and tool_saved[0]:
            stats.record_tool_output(*tool_saved)
        obs.applied(result.original_tokens, result.compressed_tokens)
        plan.content = content
        plan.arm = arm or CONTROL_ARM
        plan.compressed = True
        plan.sent_body = result.body
        plan.extra_headers = _tag(task_class, arm)
        plan.call_headers = relay.call_headers(request.headers.raw)
        plan.judge = (
            state.shadow is not None
            and class_stats.fallback_reason is None
            and state.shadow.should_sample()
        )
        return plan

    # --- forwarding ---------------------------------------------------------------

    async def _forward(
        self,
        request: Request,
        content: bytes | AsyncIterator[bytes],
        *,
        keep_length: bool,
        plan: Plan | None,
        watch: relay.ClientWatch,
        obs: Observation,
    ) -> Reply:
        state = self.state
        stats = state.stats
        scope = request.scope
        path: str = scope["path"]
        target: bytes = scope.get("raw_path") or path.encode("latin-1")
        query: bytes = scope.get("query_string", b"")
        if query:
            target += b"?" + query
        method: str = scope["method"]
        headers = relay.request_headers(scope["headers"], keep_length=keep_length)
        started = time.perf_counter()
        try:
            upstream = await state.session.request(
                method,
                relay.upstream_url(self.upstream, target),
                headers=headers,
                data=content or None,
                allow_redirects=False,
            )
        except UPSTREAM_ERRORS as exc:
            if watch.gone:  # the client's body broke off, not the upstream
                raise ClientDisconnect from exc
            stats.upstream_unreachable += 1
            if isinstance(exc, TIMEOUT_ERRORS):
                obs.upstream_error("timeout")
                log.warning("upstream timed out (%s)", type(exc).__name__)
                return relay.error_response(
                    504, "timeout_error", "tokenlens proxy: upstream timed out"
                )
            obs.upstream_error(f"unreachable:{type(exc).__name__}")
            log.warning("upstream unreachable (%s)", type(exc).__name__)
            return relay.error_response(
                502, "api_error", f"tokenlens proxy: upstream unreachable ({type(exc).__name__})"
            )
        status = upstream.status
        obs.upstream_ms = (time.perf_counter() - started) * 1000
        if status < 200:  # aiohttp skips interim answers: this is an unasked protocol switch
            upstream.close()
            stats.upstream_unreachable += 1
            obs.upstream_error(f"status:{status}")
            log.warning("upstream answered %d to a plain request", status)
            return relay.error_response(
                502, "api_error", f"tokenlens proxy: upstream answered {status} unasked"
            )
        out_headers = relay.response_headers(upstream.raw_headers)
        if relay.unsendable(out_headers):
            upstream.close()
            stats.upstream_broken += 1
            obs.upstream_error("bad_header")
            log.warning(
                "upstream answer %d carried a header no HTTP server may send (a control "
                "character or separator); answering 502",
                status,
            )
            return relay.error_response(
                502, "api_error", "tokenlens proxy: the upstream's answer carried an invalid header"
            )
        stats.upstream_status[_STATUS_CLASS.get(status // 100) or f"{status // 100}xx"] += 1
        if plan is not None:
            out_headers += plan.extra_headers
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s %s -> %d class=%s arm=%s %.1fms",
                method,
                route_kind(path),  # never the path itself: it is client text
                status,
                (plan.task_class or "-") if plan else "-",
                plan.arm.key if plan and plan.arm else "none",
                (time.perf_counter() - started) * 1000,
            )
        encoding = length = content_type = None
        for name, value in out_headers:  # already lower-cased
            if name == b"content-encoding" and encoding is None:
                encoding = value.decode("latin-1")
            elif name == b"content-length" and length is None:
                length = value.decode("latin-1")
            elif name == b"content-type" and content_type is None:
                content_type = value.decode("latin-1")
        event_stream = content_type is not None and "text/event-stream" in content_type
        if (
            not event_stream
            and length is not None
            and length.isdigit()
            and (int(length) <= relay.BUFFER_LIMIT)
        ):
            chunks: list[bytes] = []
            try:
                reader = upstream.content
                while chunk := await reader.readany():
                    chunks.append(chunk)
            except UPSTREAM_ERRORS as exc:
                # Broke off or stalled: the client gets what came, then a broken connection,
                # as from the upstream itself (never a clean end, never a made-up status).
                upstream.close()
                stats.upstream_broken += 1
                obs.upstream_error(f"body:{type(exc).__name__}")
                log.warning(
                    "upstream answer broke off (%s); aborting the client's", type(exc).__name__
                )
                return relay.StreamRelay(relay.broken(chunks), status, out_headers)
            upstream.release()
            raw = b"".join(chunks)
            watch.stop()  # the answer is whole: sending it needs no watching
            after = None
            if path == MESSAGES_PATH and status == 200:
                state.background.hold()
                after = functools.partial(self._after_json, raw, encoding, plan)
            return relay.BufferedReply(status, out_headers, raw, after)
        tap = None
        if (
            path == MESSAGES_PATH
            and status == 200
            and event_stream
            and (not encoding or encoding == "identity")
        ):
            tap = relay.SseTap(capture_text=bool(plan and plan.judge))
            state.background.hold()
        return relay.StreamRelay(self._relay_stream(upstream, tap, plan, obs), status, out_headers)

    async def _relay_stream(
        self,
        upstream: aiohttp.ClientResponse,
        tap: relay.SseTap | None,
        plan: Plan | None,
        obs: Observation,
    ) -> AsyncGenerator[bytes, None]:
        """Relay upstream chunks the moment they arrive; tap them without holding them.

        Raises BrokenAnswer when the upstream breaks off or stalls mid-answer, so the
        client's answer breaks too (see `relay.StreamRelay`).
        """
        finished = False
        try:
            reader = upstream.content
            while chunk := await reader.readany():
                if tap is not None:
                    tap.feed(chunk)
                yield chunk
            finished = True
        except UPSTREAM_ERRORS as exc:
            self.state.stats.upstream_broken += 1
            obs.upstream_error(f"stream:{type(exc).__name__}")
            log.warning("upstream answer broke off (%s); aborting the client's", type(exc).__name__)
            raise relay.BrokenAnswer from exc
        finally:
            if finished:
                upstream.release()
            else:  # cut short (error, or the client left): this connection is not reusable
                upstream.close()
            if tap is not None:
                if finished:
                    self._after(tap.usage, tap.text if tap.complete else None, plan)
                self.state.background.release()

    # --- after the response ---------------------------------------------------------

    async def _after_json(self, raw: bytes, encoding: str | None, plan: Plan | None) -> None:
        try:
            decoded = relay.decode_body(raw, encoding)
            message = relay.parse_message(decoded) if decoded is not None else None
            if message is not None:
                usage = message.get("usage")
                answer = relay.message_text(message) if plan and plan.judge else None
                self._after(usage if isinstance(usage, dict) else None, answer, plan)
        finally:
            self.state.background.release()

    def _after(self, usage: dict[str, Any] | None, answer: str | None, plan: Plan | None) -> None:
        state = self.state
        compressed = bool(plan and plan.compressed)
        if usage is not None:
            state.stats.record_usage(usage, compressed)
        if plan is None or not compressed or plan.original is None or plan.sent_body is None:
            return
        headers = plan.call_headers
        if state.settings.measure:
            original, sent, model = plan.original, plan.sent_body, plan.model
            state.background.spawn(lambda: self._measure(original, sent, model, headers))
        shadow = state.shadow
        if plan.judge and shadow is not None and answer is not None:
            assert plan.task_class is not None and plan.arm is not None
            task_class, arm_key, bar = plan.task_class, plan.arm.key, plan.bar
            original_body = plan.original
            state.background.spawn(
                lambda: shadow.judge(
                    task_class=task_class,
                    arm_key=arm_key,
                    bar=bar,
                    original_body=original_body,
                    compressed_answer=answer,
                    headers=headers,
                )
            )

    async def _measure(
        self,
        original: dict[str, Any],
        sent: dict[str, Any],
        model: str,
        headers: dict[str, str],
    ) -> None:
        """Exact counts of both bodies from the upstream's free count_tokens endpoint."""
        stats = self.state.stats
        counts: list[int] = []
        for body in (original, sent):
            try:
                async with self.state.session.post(
                    self.upstream + COUNT_TOKENS_PATH,
                    data=json.dumps(relay.count_body(body)).encode(),
                    headers={**headers, "content-type": "application/json"},
                ) as response:
                    answer = await response.read()
                value = json.loads(answer).get("input_tokens") if response.status == 200 else None
            except _MEASURE_ERRORS as exc:
                log.warning("count_tokens failed (%s)", type(exc).__name__)
                value = None
            if not isinstance(value, int):
                stats.measure_failures += 1
                return
            counts.append(value)
        stats.record_measurement(model, counts[0], counts[1])


def route_kind(path: str) -> str:
    """A loggable name for a path: the two Messages routes by name, anything else 'other'."""
    if path == MESSAGES_PATH:
        return "messages"
    if path == COUNT_TOKENS_PATH:
        return "count_tokens"
    return "other"


def _tag(task_class: str | None, arm: Arm | None) -> list[tuple[bytes, bytes]]:
    """Response headers telling the client what the proxy did (no content, just names)."""
    if task_class is None:
        return []
    return [
        (b"x-tokenlens-class", task_class.encode("latin-1")),
        (b"x-tokenlens-arm", (arm.key if arm else "none").encode("latin-1")),
    ]

"""The request path: read, decide, compress (or not), forward, relay back.

Hot path rules: without a policy or `--compress` the body is forwarded as the exact
bytes received, unparsed. Any failure of ours (a codec crash, a slow arm, a body we
cannot re-encode, an upstream that rejects the compressed body) forwards the original
instead and counts a fail-open. Nothing of a prompt or a key is ever logged: log lines
carry classes, arms, statuses and exception *types* only.

Towards the upstream the proxy behaves as the upstream would towards its client: a
client that leaves cancels the upstream call (`relay.ClientWatch`), and an upstream
answer that breaks off reaches the client broken, never cleanly ended (`relay.StreamRelay`).

The request's story (read, forward, relay back) reads top-down here; what to send
instead is `plan`'s, what follows the answer (usage, exact counts, shadow judging) is
`followup`'s, and the wire-level pieces are `relay`'s.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator

import aiohttp
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tokenlens.proxy import relay
from tokenlens.proxy.followup import COUNT_TOKENS_PATH, FollowUp
from tokenlens.proxy.observe import Observation
from tokenlens.proxy.plan import Plan, plan_request, tag
from tokenlens.proxy.state import ProxyState
from tokenlens.proxy.upstream import TIMEOUT_ERRORS, UPSTREAM_ERRORS

log = logging.getLogger("tokenlens.proxy")

MESSAGES_PATH = "/v1/messages"
_STATUS_CLASS = {1: "1xx", 2: "2xx", 3: "3xx", 4: "4xx", 5: "5xx"}
#: What the relay answers with: a whole response, or a body relayed as it arrives.
Reply = Response | relay.BufferedReply | relay.StreamRelay


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
        self.followup = FollowUp(state)

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
            # The connection closed: its request (and any upstream call for it) was cancelled.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            status = 499
            if scope.get(relay.REFUSED_KEY) is None:  # the client left (not refused by us)
                self.state.stats.client_gone += 1
                log.debug("client left; upstream request cancelled")
        finally:
            watch.stop()
            refused = scope.get(relay.REFUSED_KEY)
            if refused is not None:  # the server answered it (and counted it)
                status = refused[0]
                obs.refused(refused[1])
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
        except ClientDisconnect:  # the body broke off (any upstream call for it is dropped)
            if request.scope.get(relay.REFUSED_KEY) is None:  # the client left, not refused
                stats.client_gone += 1
                obs.pass_through("client_disconnect")
                log.info(
                    "client left mid-body on %s (client_disconnect); its upstream request "
                    "was dropped",
                    route_kind(path),
                )
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
            plan = await plan_request(self.state, request, body, obs)
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
            fallback.extra_headers = tag(plan.task_class, None)
            watch.start()  # again: reading the refusal whole stopped it
            return await self._forward(
                request, body, keep_length=False, plan=fallback, watch=watch, obs=obs
            )
        return response

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
                after = functools.partial(self.followup.after_json, raw, encoding, plan)
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
                    self.followup.after(tap.usage, tap.text if tap.complete else None, plan)
                self.state.background.release()


def route_kind(path: str) -> str:
    """A loggable name for a path: the two Messages routes by name, anything else 'other'."""
    if path == MESSAGES_PATH:
        return "messages"
    if path == COUNT_TOKENS_PATH:
        return "count_tokens"
    return "other"

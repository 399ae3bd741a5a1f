"""The proxy as a starlette app: `create_app(settings)`.

Routes: `/tokenlens/` (dashboard), `/tokenlens/feed.json`, `GET /metrics` (Prometheus),
and everything else relayed upstream. The lifespan owns the one aiohttp session to the
upstream (relayed requests and background calls), the policy poller (which also keeps the
mirrored metrics current), the access log and the background jobs. This module and
everything it imports stay light: no prefect, pandas, pyarrow or flows (a test checks
`sys.modules`), so the server starts in about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tokenlens.proxy.accesslog import AccessLog
from tokenlens.proxy.apply import (
    Compressor,
    count_tool_policy_changes,
    default_compressor,
    warm_up,
)
from tokenlens.proxy.background import BackgroundWork
from tokenlens.proxy.capture import Capture
from tokenlens.proxy.dashboard import SECURITY_HEADERS, build_feed, render_html
from tokenlens.proxy.fleet import fleet_feed
from tokenlens.proxy.handler import Handler
from tokenlens.proxy.metrics import CONTENT_TYPE, ProxyMetrics, multiprocess_dir
from tokenlens.proxy.observe import Observer
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.proxy.redact import Redactor, load_rules
from tokenlens.proxy.relay import error_response
from tokenlens.proxy.server import REFUSED_STATE, header_problem
from tokenlens.proxy.settings import ProxySettings
from tokenlens.proxy.shadow import JudgeFactory, ShadowJudge, anthropic_judge_factory
from tokenlens.proxy.state import ProxyState
from tokenlens.proxy.stats import ProxyStats
from tokenlens.proxy.upstream import open_session, outbound_proxy

log = logging.getLogger("tokenlens.proxy")

DASHBOARD_PREFIX = "/tokenlens"
METRICS_PATH = "/metrics"
#: How often the metrics mirrored from ProxyStats are brought up to date (other workers'
#: values in a multi-worker scrape lag by at most this much).
METRICS_TICK_S = 1.0
JUDGE_WARNING = (
    "SHADOW JUDGE IS ON: EVERY JUDGED REQUEST IS REPLAYED UNCOMPRESSED AND JUDGED, WHICH "
    "ROUGHLY DOUBLES THE SPEND OF THAT REQUEST (sample {sample:.0%} of compressed requests). "
    "Judge notes are derived from prompt content and shown on the dashboard."
)


#: Libraries that log request bodies, URLs or headers at INFO/DEBUG (the Anthropic SDK logs
#: whole request options at DEBUG). The proxy never lets them speak below WARNING.
CHATTY_LOGGERS = ("anthropic", "httpx", "httpcore", "httpx2", "httpcore2")


class LibraryQuiet(logging.Filter):
    """Handler filter: drop records below WARNING from `CHATTY_LOGGERS`, whatever their level
    was set to (e.g. by `ANTHROPIC_LOG=debug`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return not any(
            record.name == name or record.name.startswith(name + ".") for name in CHATTY_LOGGERS
        )


def quiet_libraries(root: logging.Logger | None = None) -> None:
    """Raise chatty library loggers to WARNING and filter every handler of `root`."""
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for handler in (root or logging.getLogger()).handlers:
        if not any(isinstance(f, LibraryQuiet) for f in handler.filters):
            handler.addFilter(LibraryQuiet())


def create_app(
    settings: ProxySettings,
    *,
    compressor: Compressor | None = None,
    judge_factory: JudgeFactory | None = None,
    store: PolicyStore | None = None,
) -> Starlette:
    """Build the app. Raises PolicyError when `settings.policy_path` cannot be loaded.

    `compressor` and `judge_factory` are seams for tests (a crashing codec, a scripted
    judge); production uses the defaults.
    """
    quiet_libraries()
    if store is None and settings.policy_location is not None:
        store = PolicyStore(settings.policy_location, allow_offline=settings.allow_offline_policy)
    stats = ProxyStats(judge_window=settings.judge_window)
    metrics = ProxyMetrics()
    if store is not None:
        store.on_change(lambda _policy: stats.reset_quality())
        store.on_change(
            count_tool_policy_changes(store.policy, settings, stats.count_tool_policy_change)
        )
        _watch_policy(store, metrics)
    capture = _capture(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        session = open_session(
            read_timeout_s=settings.upstream_timeout_s,
            connect_timeout_s=settings.connect_timeout_s,
            proxy=outbound_proxy(settings.upstream_base),
            on_discard=lambda reason: metrics.upstream_discarded.labels(reason).inc(),
        )
        background = BackgroundWork(settings.background_limit, _count_drop(stats))
        access_log = AccessLog(settings.access_log) if settings.access_log else None
        shadow = None
        if settings.judge:
            shadow = ShadowJudge(
                session=session,
                upstream=settings.upstream_base,
                stats=stats,
                factory=judge_factory
                or anthropic_judge_factory(settings.upstream_base, settings.judge_model),
                sample=settings.judge_sample,
                min_pairs=settings.judge_min_pairs,
                seed=settings.judge_seed,
            )
        state = ProxyState(
            settings=settings,
            stats=stats,
            store=store,
            compressor=compressor or default_compressor(),
            session=session,
            background=background,
            shadow=shadow,
            observer=Observer(metrics, access_log),
        )
        if state.compressing:
            await anyio.to_thread.run_sync(warm_up, state.compressor)
        app.state.proxy = state
        app.state.handler = Handler(state)
        if capture is not None:
            capture.start()
            if shadow is not None:
                shadow.on_replay = capture.replay_answer
        poller = asyncio.get_running_loop().create_task(
            _poll(store, settings.reload_interval_s, lambda: metrics.sync(stats))
        )
        try:
            # uvicorn hands its lifespan state to the protocol: refusals made there count too
            yield {REFUSED_STATE: metrics.refused_request}
        finally:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
            await background.aclose()
            await session.close()
            metrics.close()
            if access_log is not None:
                access_log.close()
            if capture is not None:
                await anyio.to_thread.run_sync(capture.close)

    def current_feed(state: ProxyState) -> dict[str, Any]:
        data = build_feed(state)
        if multiprocess_dir() is not None:  # --workers N: totals summed over all workers
            metrics.sync(stats)
            data = fleet_feed(data, metrics.families())
        return data

    async def dashboard(request: Request) -> Response:
        feed = current_feed(request.app.state.proxy)
        return HTMLResponse(render_html(feed), headers=SECURITY_HEADERS)

    async def feed(request: Request) -> Response:
        return JSONResponse(current_feed(request.app.state.proxy), headers=SECURITY_HEADERS)

    async def metrics_page(request: Request) -> Response:
        metrics.sync(stats)
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def to_dashboard(request: Request) -> Response:
        return RedirectResponse("/tokenlens/", status_code=307)

    routes = [
        Route("/tokenlens", to_dashboard, methods=["GET"]),
        Route("/tokenlens/", dashboard, methods=["GET"]),
        Route("/tokenlens/feed.json", feed, methods=["GET"]),
        Route(METRICS_PATH, metrics_page, methods=["GET"]),
    ]
    app = ProxyApp(routes=routes, lifespan=lifespan)
    app.state.capture = capture
    return app


def _capture(settings: ProxySettings) -> Capture | None:
    """The traffic capture when `--capture` is given (bad redaction rules fail here)."""
    if settings.capture_store is None:
        return None
    rules = load_rules(settings.capture_redact) if settings.capture_redact else []
    return Capture(settings.capture_store, sample=settings.capture_sample, redactor=Redactor(rules))


class ProxyApp(Starlette):
    """Starlette for the dashboard and lifespan; relayed paths skip the router entirely.

    Every path outside `/tokenlens` (and `GET /metrics`) goes straight to the relay handler:
    the middleware stack and route matching would only add latency to every proxied call.
    Requests whose headers exceed the limits get `431` before anything else
    (`server.header_problem`).
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = header_problem(scope["headers"], self.state.proxy.settings)
            if problem is not None:
                self.state.proxy.observer.metrics.refused_request(431, "header_limits")
                log.warning("request headers over the limits (431)")
                await error_response(431, "invalid_request_error", problem)(scope, receive, send)
                return
        path = scope.get("path", "")
        ours = (
            path == DASHBOARD_PREFIX
            or path.startswith(DASHBOARD_PREFIX + "/")
            or (path == METRICS_PATH and scope.get("method") == "GET")
        )
        if scope["type"] == "http" and not ours:
            handler: Handler = self.state.handler
            capture: Capture | None = self.state.capture
            if capture is not None:  # opt-in: tees a sample of Messages requests
                await capture.serve(handler.asgi, scope, receive, send)
            else:
                await handler.asgi(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _count_drop(stats: ProxyStats) -> Any:
    def drop() -> None:
        stats.background_dropped += 1

    return drop


def _watch_policy(store: PolicyStore, metrics: ProxyMetrics) -> None:
    """Policy in force, reloads and failed polls, as metrics."""
    metrics.policy_in_force(store.policy, store.loaded_at)
    store.on_change(lambda policy: metrics.policy_in_force(policy, store.loaded_at))
    store.on_poll(metrics.policy_polled)


async def _poll(store: PolicyStore | None, interval_s: float, tick: Callable[[], None]) -> None:
    """Poll the policy source every `interval_s` (the store logs and counts rejections),
    and `tick()` at least every second (brings the mirrored metrics up to date)."""
    loop = asyncio.get_running_loop()
    next_poll = loop.time() + interval_s
    while True:
        await asyncio.sleep(min(interval_s, METRICS_TICK_S))
        try:
            if store is not None and loop.time() >= next_poll:
                next_poll = loop.time() + interval_s
                await store.poll()
            tick()
        except Exception as exc:  # the poller must outlive any surprise
            log.warning("policy poll failed (%s)", type(exc).__name__)

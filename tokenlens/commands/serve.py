"""`tokenlens serve`: run the proxy. Point `ANTHROPIC_BASE_URL` at it and change nothing else.

Imports stay light (no prefect, pandas or torch at startup), so the server is listening
about a second after the command starts; LLMLingua-2 loads only if a policy uses it.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenlens.proxy.settings import ProxySettings

log = logging.getLogger("tokenlens.proxy")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from tokenlens.proxy import settings as defaults

    parser = sub.add_parser(
        "serve",
        help="run the Anthropic-compatible proxy that applies the policy",
        description="An Anthropic-compatible proxy. Applies the latest published policy per "
        "request, fails open, and can measure and shadow-judge what it does. Prompt bodies "
        "and keys are never logged or stored (--capture: a redacted sample, opt-in).",
    )
    parser.add_argument(
        "--policy",
        # `--eval-report`: the article's spelling (docs/article.md).
        "--eval-report",
        default=None,
        help="policy to apply and hot-reload: a file (e.g. reports/policy/latest.json) or a "
        "URL (https://..., http://..., s3://bucket/key); with --compress, only its per-class "
        "bars and calibrated figures are used",
    )
    parser.add_argument(
        "--upstream",
        default=defaults.DEFAULT_UPSTREAM,
        help=f"Anthropic API base URL (default {defaults.DEFAULT_UPSTREAM})",
    )
    parser.add_argument("--host", default=defaults.DEFAULT_HOST, help="bind address (loopback)")
    parser.add_argument("--port", type=int, default=defaults.DEFAULT_PORT, help="bind port")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (the proxy and its dashboard have no auth)",
    )
    parser.add_argument(
        "--allow-provisional",
        action="store_true",
        help="also apply ? (provisional) policy entries; by default they get `safe` only",
    )
    parser.add_argument(
        "--allow-offline-policy",
        action="store_true",
        help="apply a policy calibrated offline on the embedded local model (refused by "
        "default: its numbers describe a tiny model, not Claude); for demos",
    )
    parser.add_argument(
        "--compress",
        metavar="ARM",
        default=None,
        help="apply this arm to every request (e.g. prune, minify), in place of the policy's arms",
    )
    parser.add_argument("--rate", type=float, default=None, help="keep rate for --compress")
    parser.add_argument(
        "--compress-tools",
        metavar="SPEC",
        default=None,
        help="tool-output arms for every request, in place of the policy's: one arm for every "
        "kind (lossless, elide@0.5) or KIND=ARM,... (search=elide@0.5,json=lossless)",
    )
    parser.add_argument(
        "--measure",
        action="store_true",
        help="exact original vs compressed counts via count_tokens, off the hot path",
    )
    parser.add_argument(
        "--judge",
        action="store_true",
        help="shadow-judge a sample of compressed requests (roughly doubles their spend)",
    )
    parser.add_argument(
        "--judge-sample",
        type=float,
        default=defaults.DEFAULT_JUDGE_SAMPLE,
        help="share of compressed requests to judge (default %(default)s)",
    )
    parser.add_argument(
        "--judge-model",
        default=defaults.DEFAULT_JUDGE_MODEL,
        help="judge model (default %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=defaults.DEFAULT_MAX_BODY_BYTES,
        help="bodies above this are relayed uncompressed (default %(default)s)",
    )
    parser.add_argument(
        "--compress-budget-ms",
        type=float,
        default=defaults.DEFAULT_COMPRESS_BUDGET_MS,
        help="compression slower than this forwards the original (default %(default)s)",
    )
    parser.add_argument(
        "--reload-interval",
        type=float,
        default=None,
        help=f"seconds between policy checks (default {defaults.DEFAULT_RELOAD_INTERVAL_S:g} "
        f"for a file, {defaults.URL_RELOAD_INTERVAL_S:g} for a URL)",
    )
    # --- observability and fleet -----------------------------------------------------------
    parser.add_argument(
        "--access-log",
        nargs="?",
        const="-",
        default=None,
        metavar="PATH",
        help="one JSON line per request (class, arm, outcome, status, timings, token counts; "
        "never content or keys) to PATH, or to standard output with - or no value",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes serving the port; /metrics and the dashboard sum them (default 1)",
    )
    parser.add_argument(
        "--upstream-timeout",
        type=float,
        default=defaults.DEFAULT_UPSTREAM_TIMEOUT_S,
        help="seconds to wait for the upstream's next bytes: the answer's start, then each "
        "piece of it (default %(default)s; past it: 504, or a broken stream)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=defaults.DEFAULT_CONNECT_TIMEOUT_S,
        help="seconds to connect to the upstream (default %(default)s)",
    )
    parser.add_argument(
        "--max-header-count",
        type=int,
        default=defaults.DEFAULT_MAX_HEADER_COUNT,
        help="most request headers accepted; more get 431 (default %(default)s)",
    )
    parser.add_argument(
        "--max-header-bytes",
        type=int,
        default=defaults.DEFAULT_MAX_HEADER_BYTES,
        help="most bytes of request headers accepted; more get 431 (default %(default)s)",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=defaults.DEFAULT_HEADER_TIMEOUT_S,
        help="seconds a request's headers may take to arrive; slower gets 408 "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=defaults.DEFAULT_BODY_TIMEOUT_S,
        help="seconds a request's body may take after its headers, plus one for every "
        f"{defaults.MIN_BODY_RATE // 1024} KiB received; slower gets 408 (default %(default)s)",
    )
    parser.add_argument(
        "--keep-alive-timeout",
        type=int,
        default=defaults.DEFAULT_KEEPALIVE_TIMEOUT_S,
        help="seconds an idle client connection is kept open (default %(default)s)",
    )
    parser.add_argument(
        "--capture",
        metavar="STORE",
        default=None,
        help="record a redacted sample of requests and answers under this folder or fsspec "
        "URL, for `tokenlens tasks harvest` (off by default)",
    )
    parser.add_argument(
        "--capture-sample",
        type=float,
        default=defaults.DEFAULT_CAPTURE_SAMPLE,
        help="share of Messages requests captured (default %(default)s)",
    )
    parser.add_argument(
        "--capture-redact",
        type=Path,
        default=None,
        metavar="FILE",
        help="extra redaction rules, one regex per line (built-ins: e-mail addresses, "
        "API-key shapes, long digit runs)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    import uvicorn

    from tokenlens.proxy.app import JUDGE_WARNING, create_app, quiet_libraries
    from tokenlens.proxy.apply import settle_process
    from tokenlens.proxy.server import ProxyServerConfig
    from tokenlens.proxy.settings import is_loopback, settings_from_args
    from tokenlens.proxy.upstream import outbound_proxy

    settings = settings_from_args(args)
    # httpx logs every URL at INFO and the SDK whole requests at DEBUG, even under -v:
    # the proxy logs its own lines, which carry no prompt, key, path or query.
    quiet_libraries()
    log.info("upstream connection: %s", outbound_proxy(settings.upstream_base).described)
    if not is_loopback(settings.host):
        log.warning(
            "binding %s (not loopback): anyone who can reach this port can use the proxy "
            "with their key and read the dashboard",
            settings.host,
        )
    if settings.workers > 1:
        return _run_workers(args, settings)
    app = create_app(settings)  # loads the policy: PolicyError ends here, before binding
    if settings.judge:
        log.warning(JUDGE_WARNING.format(sample=settings.judge_sample))
    if settings.capture_store is not None:
        from tokenlens.proxy.capture import CAPTURE_WARNING

        log.warning(
            CAPTURE_WARNING.format(sample=settings.capture_sample, store=settings.capture_store)
        )
    if settings.policy_location is not None and settings.override_arm is not None:
        log.info(
            "policy: %s (its bars and figures only: --compress applies %s to every request)",
            settings.policy_location,
            settings.override_arm.label,
        )
    elif settings.policy_location is not None:
        log.info("policy: %s", settings.policy_location)
    elif settings.override_arm is not None:
        log.info("no policy: applying %s to every request", settings.override_arm.label)
    else:
        log.info("no policy and no --compress: pure pass-through")
    if settings.override_tool_arms is not None:
        log.info(
            "tool outputs: %s",
            ", ".join(f"{kind}={arm.key}" for kind, arm in settings.override_tool_arms),
        )
    config = ProxyServerConfig(app, settings, log_level="info", log_config=None)
    server = uvicorn.Server(config)
    # Everything loaded so far lives as long as the process: exempt it from the cyclic
    # collector, so a full collection never pauses a relayed request to rescan it.
    settle_process(settings.compresses)
    log.info(
        "tokenlens proxy on http://%s:%d -> %s (dashboard /tokenlens/; ready in %.2f s "
        "after import)",
        settings.host,
        settings.port,
        settings.upstream_base,
        time.perf_counter() - started,
    )
    server.run()
    return 0 if server.started else 1


def _run_workers(args: argparse.Namespace, settings: ProxySettings) -> int:
    """`--workers N`: check the policy once here (a bad one fails before binding), then let
    uvicorn's supervisor run N processes that each build the app (see proxy.workers)."""
    from tokenlens.proxy.app import JUDGE_WARNING
    from tokenlens.proxy.policy_store import PolicyStore
    from tokenlens.proxy.workers import run_workers

    if settings.policy_location is not None:
        PolicyStore(settings.policy_location, allow_offline=settings.allow_offline_policy)
    if settings.judge:
        log.warning(JUDGE_WARNING.format(sample=settings.judge_sample))
    log.info(
        "tokenlens proxy on http://%s:%d -> %s with %d workers (dashboard /tokenlens/)",
        settings.host,
        settings.port,
        settings.upstream_base,
        settings.workers,
    )
    return run_workers(args, settings)

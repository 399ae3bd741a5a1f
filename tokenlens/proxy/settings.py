"""The proxy's settings as one frozen object, built from `tokenlens serve`'s arguments
(`settings_from_args`, here so the proxy's workers need nothing from `commands/`) or by tests.

Why one object: the app factory, the relay and the dashboard all read the same values, and
the dashboard can show exactly what is in force without re-parsing the command line.
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from tokenlens.compress.arms import Arm
from tokenlens.compress.toolout.kinds import KINDS
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.errors import TokenLensError

DEFAULT_UPSTREAM = "https://api.anthropic.com"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
#: Bodies above this are relayed untouched and unread (streamed through).
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Compression slower than this is abandoned and the original body forwarded.
DEFAULT_COMPRESS_BUDGET_MS = 250.0
DEFAULT_JUDGE_SAMPLE = 0.25
DEFAULT_JUDGE_MODEL = "claude-haiku-4-5"
#: Rolling retention window per class, and how many judged pairs before it may act.
DEFAULT_JUDGE_WINDOW = 20
DEFAULT_JUDGE_MIN_PAIRS = 5
#: How often the policy file is checked for a change (a stat call; cheap).
DEFAULT_RELOAD_INTERVAL_S = 1.0
#: Remote policies are checked less often than a local file (each check is a request).
URL_RELOAD_INTERVAL_S = 30.0
#: The longest wait for the upstream's next bytes (its answer's head, then each piece of
#: the body). Generous: a long non-streaming Messages call may take minutes before the
#: first byte; the SDK itself waits 10 minutes.
DEFAULT_UPSTREAM_TIMEOUT_S = 600.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: Limits on what clients send (see `tokenlens.proxy.server`): header count and total size
#: (gunicorn allows 100 header fields; nginx 32 KiB of header lines by default), the time
#: a request's head may take to arrive (slowloris), and how long an idle kept-alive
#: connection stays open (uvicorn's default).
DEFAULT_MAX_HEADER_COUNT = 100
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_HEADER_TIMEOUT_S = 10.0
#: A request's body must arrive within this many seconds of its head, plus one second for
#: every `MIN_BODY_RATE` bytes received (a slow trickle is cut off; a large upload on a
#: slow link is not), as Apache's mod_reqtimeout does.
DEFAULT_BODY_TIMEOUT_S = 30.0
MIN_BODY_RATE = 16 * 1024
DEFAULT_KEEPALIVE_TIMEOUT_S = 5
#: Bounded background work (measure and shadow judge): excess is dropped, never queued.
DEFAULT_BACKGROUND_LIMIT = 8
#: `--policy` values read as URLs rather than paths (see tokenlens.proxy.policy_source).
POLICY_URL_SCHEMES = ("http://", "https://", "s3://")
#: `--capture`: share of Messages requests recorded for `tokenlens tasks harvest`.
DEFAULT_CAPTURE_SAMPLE = 0.02
#: The gentlest rung: what a class may still get when its policy allows no more.
FLOOR_ARM = Arm("safe")


@dataclass(frozen=True)
class ProxySettings:
    """Everything that decides what the proxy does with a request."""

    upstream: str = DEFAULT_UPSTREAM
    policy_path: Path | None = None
    allow_provisional: bool = False
    #: Apply a policy calibrated on the embedded local model (refused by default: its
    #: numbers describe a tiny model, not Claude).
    allow_offline_policy: bool = False
    #: `--compress ARM --rate R`: one arm for every request. With a policy as well, the
    #: policy still gives each class its bar (the shadow judge's fallback) and the
    #: dashboard its calibrated figures; only its choice of arm is overridden.
    override_arm: Arm | None = None
    #: `--compress-tools SPEC`: tool-output arms by kind for every request, in place of
    #: the policy's (`tokenlens.compress.toolout`).
    override_tool_arms: tuple[tuple[str, ToolArm], ...] | None = None
    measure: bool = False
    judge: bool = False
    judge_sample: float = DEFAULT_JUDGE_SAMPLE
    judge_model: str = DEFAULT_JUDGE_MODEL
    judge_window: int = DEFAULT_JUDGE_WINDOW
    judge_min_pairs: int = DEFAULT_JUDGE_MIN_PAIRS
    judge_seed: int | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    compress_budget_ms: float = DEFAULT_COMPRESS_BUDGET_MS
    reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S
    upstream_timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    max_header_count: int = DEFAULT_MAX_HEADER_COUNT
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    keepalive_timeout_s: int = DEFAULT_KEEPALIVE_TIMEOUT_S
    background_limit: int = DEFAULT_BACKGROUND_LIMIT
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allow_remote: bool = False
    # --- observability and fleet (see tokenlens.proxy.metrics / policy_source / workers) ---
    #: `--policy` given as a URL (http(s):// or s3://) instead of a local path.
    policy_url: str | None = None
    #: `--access-log`: a file path, `-` for standard output, None for off.
    access_log: str | None = None
    workers: int = 1
    #: `--capture STORE`: record a redacted sample of traffic (`tokenlens.proxy.capture`).
    capture_store: str | None = None
    capture_sample: float = DEFAULT_CAPTURE_SAMPLE
    capture_redact: Path | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.judge_sample <= 1.0:
            raise ValueError(f"judge_sample must be within [0, 1], got {self.judge_sample}")
        if not 0.0 <= self.capture_sample <= 1.0:
            raise ValueError(f"capture_sample must be within [0, 1], got {self.capture_sample}")
        if self.max_body_bytes < 0:
            raise ValueError(f"max_body_bytes must be >= 0, got {self.max_body_bytes}")
        if self.compress_budget_ms <= 0:
            raise ValueError(f"compress_budget_ms must be > 0, got {self.compress_budget_ms}")
        if self.judge_window < 1 or not 1 <= self.judge_min_pairs <= self.judge_window:
            raise ValueError(
                f"need 1 <= judge_min_pairs ({self.judge_min_pairs}) <= judge_window "
                f"({self.judge_window})"
            )
        for name in (
            "upstream_timeout_s",
            "connect_timeout_s",
            "header_timeout_s",
            "body_timeout_s",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("max_header_count", "max_header_bytes", "keepalive_timeout_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.policy_path is not None and self.policy_url is not None:
            raise ValueError("give the policy as a path or as a URL, not both")
        if self.policy_url is not None and not self.policy_url.startswith(POLICY_URL_SCHEMES):
            raise ValueError(f"policy URL must start with one of {POLICY_URL_SCHEMES}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        if not self.upstream.startswith(("http://", "https://")):
            raise ValueError(f"upstream must be an http(s) URL, got {self.upstream!r}")

    @property
    def upstream_base(self) -> str:
        return self.upstream.rstrip("/")

    @property
    def policy_location(self) -> str | Path | None:
        """The policy's path or URL, whichever was given."""
        return self.policy_url if self.policy_url is not None else self.policy_path

    @property
    def compresses(self) -> bool:
        """A policy or `--compress`: the proxy may rewrite bodies (else pure pass-through)."""
        return (
            self.policy_location is not None
            or self.override_arm is not None
            or self.override_tool_arms is not None
        )


def parse_tool_arms(spec: str) -> tuple[tuple[str, ToolArm], ...]:
    """``elide@0.5`` (every kind) or ``search=elide@0.5,json=lossless``; ValueError if wrong."""
    pairs: list[tuple[str, ToolArm]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        kind, eq, arm = part.rpartition("=")
        if not eq:
            pairs.extend((k, ToolArm.parse(arm)) for k in KINDS)
        elif kind.strip() not in KINDS:
            raise ValueError(
                f"unknown tool-output kind {kind.strip()!r} (known: {', '.join(KINDS)})"
            )
        else:
            pairs.append((kind.strip(), ToolArm.parse(arm)))
    if not pairs:
        raise ValueError("no arm given")
    return tuple(dict(pairs).items())


def is_loopback(host: str) -> bool:
    """True for names and addresses that only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def settings_from_args(args: argparse.Namespace) -> ProxySettings:
    """ProxySettings from parsed `tokenlens serve` arguments (in `serve`, and again in each
    `--workers` process); TokenLensError with a clear message if wrong."""
    override: Arm | None = None
    if args.compress is not None:
        try:
            override = (
                Arm(args.compress, args.rate)
                if "@" not in args.compress
                else Arm.parse(args.compress)
            )
        except ValueError as exc:
            raise TokenLensError(f"--compress: {exc}") from exc
    elif args.rate is not None:
        raise TokenLensError("--rate needs --compress ARM")
    tool_arms = None
    if getattr(args, "compress_tools", None):
        try:
            tool_arms = parse_tool_arms(args.compress_tools)
        except ValueError as exc:
            raise TokenLensError(f"--compress-tools: {exc}") from exc
    if args.capture is None and args.capture_redact is not None:
        raise TokenLensError("--capture-redact needs --capture STORE")
    if not is_loopback(args.host) and not args.allow_remote:
        raise TokenLensError(
            f"--host {args.host} is not a loopback address; the proxy and its dashboard have "
            "no authentication. Pass --allow-remote to bind it anyway."
        )
    policy: str | None = args.policy
    is_url = policy is not None and policy.startswith(POLICY_URL_SCHEMES)
    reload_interval = args.reload_interval
    if reload_interval is None:
        reload_interval = URL_RELOAD_INTERVAL_S if is_url else DEFAULT_RELOAD_INTERVAL_S
    if reload_interval <= 0:
        raise TokenLensError(f"--reload-interval must be > 0, got {reload_interval}")
    if args.access_log not in (None, "-") and not Path(args.access_log).parent.is_dir():
        raise TokenLensError(
            f"--access-log {args.access_log}: folder {Path(args.access_log).parent} does not exist"
        )
    try:
        return ProxySettings(
            upstream=args.upstream,
            policy_path=Path(policy) if policy is not None and not is_url else None,
            policy_url=policy if is_url else None,
            access_log=args.access_log,
            workers=args.workers,
            allow_provisional=args.allow_provisional,
            allow_offline_policy=args.allow_offline_policy,
            override_arm=override,
            override_tool_arms=tool_arms,
            measure=args.measure,
            judge=args.judge,
            judge_sample=args.judge_sample,
            judge_model=args.judge_model,
            max_body_bytes=args.max_body_bytes,
            compress_budget_ms=args.compress_budget_ms,
            reload_interval_s=reload_interval,
            upstream_timeout_s=args.upstream_timeout,
            connect_timeout_s=args.connect_timeout,
            max_header_count=args.max_header_count,
            max_header_bytes=args.max_header_bytes,
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
            keepalive_timeout_s=args.keep_alive_timeout,
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            capture_store=args.capture,
            capture_sample=args.capture_sample,
            # a Path again: `--workers` hands the arguments to each worker as JSON strings
            capture_redact=Path(args.capture_redact) if args.capture_redact else None,
        )
    except ValueError as exc:
        raise TokenLensError(f"tokenlens serve: {exc}") from exc

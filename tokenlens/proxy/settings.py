"""The proxy's settings as one frozen object, built by `tokenlens serve` or by tests.

Why one object: the app factory, the relay and the dashboard all read the same values, and
the dashboard can show exactly what is in force without re-parsing the command line.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tokenlens.compress.arms import Arm

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
#: Generous: a long Messages call may take minutes; the SDK itself waits 10 minutes.
DEFAULT_UPSTREAM_TIMEOUT_S = 600.0
#: Bounded background work (measure and shadow judge): excess is dropped, never queued.
DEFAULT_BACKGROUND_LIMIT = 8
#: `--policy` values read as URLs rather than paths (see tokenlens.proxy.policy_source).
POLICY_URL_SCHEMES = ("http://", "https://", "s3://")
#: The gentlest rung: what a class may still get when its policy allows no more.
FLOOR_ARM = Arm("safe")


@dataclass(frozen=True)
class ProxySettings:
    """Everything that decides what the proxy does with a request."""

    upstream: str = DEFAULT_UPSTREAM
    policy_path: Path | None = None
    allow_provisional: bool = False
    #: `--compress ARM --rate R`: one arm for every request, for users without a policy.
    override_arm: Arm | None = None
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

    def __post_init__(self) -> None:
        if not 0.0 <= self.judge_sample <= 1.0:
            raise ValueError(f"judge_sample must be within [0, 1], got {self.judge_sample}")
        if self.max_body_bytes < 0:
            raise ValueError(f"max_body_bytes must be >= 0, got {self.max_body_bytes}")
        if self.compress_budget_ms <= 0:
            raise ValueError(f"compress_budget_ms must be > 0, got {self.compress_budget_ms}")
        if self.judge_window < 1 or not 1 <= self.judge_min_pairs <= self.judge_window:
            raise ValueError(
                f"need 1 <= judge_min_pairs ({self.judge_min_pairs}) <= judge_window "
                f"({self.judge_window})"
            )
        if self.override_arm is not None and self.policy_location is not None:
            raise ValueError("give either a policy or --compress, not both")
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


def is_loopback(host: str) -> bool:
    """True for names and addresses that only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def ignored_proxy_env(upstream: str, environ: Mapping[str, str]) -> str | None:
    """The outbound-proxy variable that would apply to `upstream`, or None.

    Why a warning and not support: the relay connects to the upstream itself (no CONNECT
    tunnelling), so behind a mandatory corporate proxy relayed requests would fail while
    the background calls, made with httpx, honour the variable. Saying so at start-up
    beats a confusing 502 later.
    """
    parts = urlsplit(upstream)
    names = ("https_proxy", "all_proxy") if parts.scheme == "https" else ("http_proxy", "all_proxy")
    lowered = {key.lower(): value for key, value in environ.items() if value}
    found = next((name for name in names if name in lowered), None)
    if found is None:
        return None
    no_proxy = lowered.get("no_proxy", "")
    host = parts.hostname or ""
    for entry in (item.strip().lower() for item in no_proxy.split(",")):
        if entry == "*" or (
            entry and (host == entry.lstrip(".") or host.endswith("." + entry.lstrip(".")))
        ):
            return None
    return found.upper()

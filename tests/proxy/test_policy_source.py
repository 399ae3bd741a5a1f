"""`--policy` as a URL: S3 through moto's real HTTP endpoint, and HTTP with ETags.

Both run the proxy on loopback with a short poll interval and check, through the proxy's
own `/metrics` and dashboard feed, that a changed policy is picked up, a corrupt or
unreachable one is counted while the last good one stays in force, and an unchanged HTTP
policy costs a `304` without a body.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

import boto3
import httpx
import pytest
import trustme
import uvicorn
from moto.server import ThreadedMotoServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tokenlens.cli import build_parser
from tokenlens.errors import PolicyError, TokenLensError
from tokenlens.policy import write_policy
from tokenlens.proxy.policy_source import settled
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.proxy.settings import ProxySettings, settings_from_args
from tokenlens.testing import FakeAnthropic

from .conftest import (
    ProxyServer,
    SdkFor,
    ThreadServer,
    entry,
    free_port,
    make_policy,
    messages_body,
    standard_policy,
)
from .test_metrics import _wait_for, scrape, value

StartProxy = Callable[..., ProxyServer]
BUCKET = "tokenlens-policies"


def _policy_json(cid: str) -> bytes:
    return standard_policy(cid).model_dump_json(indent=2).encode()


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real S3 HTTP endpoint on loopback (moto), reached through the standard AWS settings."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, setting in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }.items():
        monkeypatch.setenv(name, setting)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # boto3's first use allocates enough to start a garbage collection: sockets that earlier
    # tests left unclosed (e.g. SDK clients never closed) would raise their ResourceWarning
    # here, inside this fixture. Collect them first, where their warnings are not ours.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def _put(endpoint: str, key: str, body: bytes) -> None:
    boto3.client("s3", endpoint_url=endpoint).put_object(Bucket=BUCKET, Key=key, Body=body)


def _calibration(proxy: ProxyServer) -> str:
    policy = proxy.feed()["policy"]
    assert policy is not None
    return str(policy["calibration_id"])


def test_policy_from_s3_hot_reloads_and_keeps_the_last_good(
    s3: str, fake_anthropic: FakeAnthropic, start_proxy: StartProxy, sdk_for: SdkFor
) -> None:
    _put(s3, "prod/policy.json", _policy_json("cal-00000001"))
    url = f"s3://{BUCKET}/prod/policy.json"
    proxy = start_proxy(
        ProxySettings(upstream=fake_anthropic.base_url, policy_url=url, reload_interval_s=0.1)
    )
    sdk = sdk_for(proxy)
    reply = sdk.messages.with_raw_response.create(**messages_body())
    assert reply.headers["x-tokenlens-arm"] == "prune@0.5"  # the S3 policy is in force
    assert proxy.feed()["policy"]["path"] == url
    # Polls of an unchanged object are counted as such (waited for: a busy machine may not
    # have polled yet, and every later poll sees a change, a corruption or a deletion).
    _wait_for(
        lambda: value(scrape(proxy)[1], "tokenlens_policy_polls_total", result="unchanged") >= 1
    )

    # A new policy: extraction now gets `prune@0.3`.
    changed = make_policy(
        {"extraction": entry("extraction", "measured", "prune", 0.3)}, cid="cal-00000002"
    )
    _put(s3, "prod/policy.json", changed.model_dump_json().encode())
    _wait_for(lambda: _calibration(proxy) == "cal-00000002")
    reply = sdk.messages.with_raw_response.create(**messages_body())
    assert reply.headers["x-tokenlens-arm"] == "prune@0.3"

    # Corrupt: rejected, counted, the last good policy stays.
    _put(s3, "prod/policy.json", b'{"schema_version": 1, "classes": {')
    _wait_for(
        lambda: (
            value(scrape(proxy)[1], "tokenlens_policy_reload_failures_total", reason="invalid") == 1
        )
    )
    assert _calibration(proxy) == "cal-00000002"
    assert "not valid JSON" in (proxy.feed()["policy"]["last_error"] or "")
    reply = sdk.messages.with_raw_response.create(**messages_body())
    assert reply.headers["x-tokenlens-arm"] == "prune@0.3"

    # Gone: unreachable, counted, still the last good.
    boto3.client("s3", endpoint_url=s3).delete_object(Bucket=BUCKET, Key="prod/policy.json")
    _wait_for(
        lambda: (
            value(scrape(proxy)[1], "tokenlens_policy_reload_failures_total", reason="unreachable")
            >= 1
        )
    )
    assert _calibration(proxy) == "cal-00000002"
    _, samples = scrape(proxy)
    assert value(samples, "tokenlens_policy_polls_total", result="reloaded") == 1
    assert value(samples, "tokenlens_policy_polls_total", result="unchanged") >= 1
    assert value(samples, "tokenlens_policy_info", calibration_id="cal-00000002") == 1


def test_an_unreachable_policy_url_fails_at_start_naming_it(s3: str) -> None:
    with pytest.raises(PolicyError, match=rf"s3://{BUCKET}/missing\.json: .*not found"):
        PolicyStore(f"s3://{BUCKET}/missing.json")
    with pytest.raises(PolicyError, match=r"policy URL unreachable"):
        PolicyStore(f"http://127.0.0.1:{free_port()}/policy.json")


@dataclass
class EtagServer:
    """Serves one policy with an ETag and answers `If-None-Match` with 304, counting both."""

    body: bytes
    version: int = 1
    status: int = 200
    answered: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, body: bytes) -> None:
        with self.lock:
            self.body, self.version = body, self.version + 1

    def app(self) -> Starlette:
        async def policy(request: Request) -> Response:
            with self.lock:
                etag = f'"v{self.version}"'
                if self.status != 200:
                    response = Response(b"down", status_code=self.status)
                elif request.headers.get("if-none-match") == etag:
                    response = Response(status_code=304, headers={"ETag": etag})
                else:
                    response = Response(self.body, headers={"ETag": etag})
                self.answered[response.status_code] = self.answered.get(response.status_code, 0) + 1
            return response

        return Starlette(routes=[Route("/policy.json", policy)])


def test_policy_from_http_uses_etags(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy
) -> None:
    origin = EtagServer(_policy_json("cal-00000001"))
    server = ThreadServer(origin.app()).start()
    try:
        url = f"{server.base_url}/policy.json?token=secret-signature"
        proxy = start_proxy(
            ProxySettings(upstream=fake_anthropic.base_url, policy_url=url, reload_interval_s=0.05)
        )
        assert proxy.feed()["policy"]["path"] == f"{server.base_url}/policy.json"  # no query
        _wait_for(lambda: origin.answered.get(304, 0) >= 3)
        _, samples = scrape(proxy)
        not_modified = value(samples, "tokenlens_policy_polls_total", result="not_modified")
        assert 3 <= not_modified <= origin.answered[304]
        assert origin.answered[200] == 1  # only the start-up load carried a body

        origin.set(make_policy({}, cid="cal-00000009").model_dump_json().encode())
        _wait_for(lambda: _calibration(proxy) == "cal-00000009")
        assert origin.answered[200] == 2

        origin.status = 503
        _wait_for(
            lambda: (
                value(
                    scrape(proxy)[1], "tokenlens_policy_reload_failures_total", reason="unreachable"
                )
                >= 1
            )
        )
        assert _calibration(proxy) == "cal-00000009"
        assert "HTTP 503" in (proxy.feed()["policy"]["last_error"] or "")
        assert "secret-signature" not in scrape(proxy)[0]
    finally:
        server.stop()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """`python -m http.server` (Last-Modified in whole seconds, no ETag) serving a folder."""
    folder = tmp_path / "served"
    folder.mkdir()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _answers(base), timeout=20)
        yield folder, base
    finally:
        process.terminate()
        process.wait(timeout=10)


def _answers(base: str) -> bool:
    try:
        httpx.get(base, timeout=1)
    except httpx.HTTPError:
        return False
    return True


def test_a_second_publish_within_one_second_is_picked_up_at_the_next_poll(
    http_server: tuple[Path, str],
) -> None:
    """Issue 24.4: with only `Last-Modified` (whole seconds), two publishes within one
    second used to look like one: every later poll got `304` and the second policy was
    never loaded."""
    folder, base = http_server
    results: list[str] = []
    for _attempt in range(10):  # both publishes must fall within one second of the clock
        time.sleep(1.02 - time.time() % 1)  # just after a second begins
        write_policy(standard_policy("cal-00000001"), folder)
        first = int((folder / "latest.json").stat().st_mtime)
        store = PolicyStore(f"{base}/latest.json")
        write_policy(standard_policy("cal-00000002"), folder)
        if int((folder / "latest.json").stat().st_mtime) == first:
            break
    else:
        raise AssertionError("could not publish twice within one second in 10 tries")
    assert store.policy.calibration_id == "cal-00000001"
    store.on_poll(results.append)
    assert store.refresh()  # the next poll
    assert store.policy.calibration_id == "cal-00000002"
    # once the second is over, Last-Modified validates again: unchanged polls cost a 304
    time.sleep(1.1)
    store.refresh()
    store.refresh()
    assert results[-1] == "not_modified"


def test_last_modified_validates_only_once_its_second_is_over() -> None:
    lm = "Wed, 21 Oct 2026 07:28:00 GMT"
    assert settled(lm, "Wed, 21 Oct 2026 07:28:00 GMT") is None  # its own second
    assert settled(lm, "Wed, 21 Oct 2026 07:28:01 GMT") == lm
    assert settled(lm, None) == lm  # long past by our clock
    assert settled(formatdate(time.time(), usegmt=True), None) is None
    assert settled("yesterday", "Wed, 21 Oct 2026 07:28:01 GMT") is None
    assert settled(None, None) is None


def _settings(*argv: str) -> ProxySettings:
    return settings_from_args(build_parser().parse_args(["serve", *argv]))


def test_serve_reads_policy_urls_paths_and_the_new_flags(tmp_path: Path) -> None:
    remote = _settings("--policy", "s3://bucket/prod/latest.json")
    assert remote.policy_url == "s3://bucket/prod/latest.json" and remote.policy_path is None
    assert remote.reload_interval_s == 30.0  # a URL is checked less often than a file
    local = _settings("--policy", "reports/policy/latest.json", "--access-log")
    assert local.policy_path == Path("reports/policy/latest.json") and local.policy_url is None
    assert local.reload_interval_s == 1.0 and local.access_log == "-"
    https = _settings("--policy", "https://example.test/p.json", "--reload-interval", "5")
    assert https.policy_url == "https://example.test/p.json" and https.reload_interval_s == 5.0
    fleet = _settings("--workers", "3", "--access-log", str(tmp_path / "a.jsonl"))
    assert fleet.workers == 3 and fleet.access_log == str(tmp_path / "a.jsonl")
    with pytest.raises(TokenLensError, match="workers must be >= 1"):
        _settings("--workers", "0")
    with pytest.raises(TokenLensError, match=r"--access-log .*does not exist"):
        _settings("--access-log", str(tmp_path / "missing" / "a.jsonl"))
    with pytest.raises(TokenLensError, match="--reload-interval must be > 0"):
        _settings("--reload-interval", "0")
    assert _settings("--body-timeout", "7.5").body_timeout_s == 7.5
    assert _settings().body_timeout_s == 30.0
    with pytest.raises(TokenLensError, match="body_timeout_s must be > 0"):
        _settings("--body-timeout", "0")


def test_a_policy_nested_beyond_the_parser_limit_is_a_policy_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PolicyError, match=r"deep\.json: unreadable policy \(RecursionError\)"):
        PolicyStore(deep)
    good = tmp_path / "policy"
    write_policy(standard_policy(), good)
    store = PolicyStore(good / "latest.json")
    (good / "latest.json").write_text("[" * 100_000 + "]" * 100_000)
    assert store.refresh() is False and "RecursionError" in (store.last_error or "")
    assert store.policy.calibration_id == "cal-00000001"


def test_policy_over_https_trusts_ssl_cert_file(tmp_path: Path) -> None:
    """A policy behind a private CA: trusted through SSL_CERT_FILE (aiohttp's trust_env
    world), refused without it. Run in a subprocess: the CA file is read when the TLS
    context is first built, so the variable must be set before that process starts."""
    ca = trustme.CA()
    served = ca.issue_cert("127.0.0.1")
    cert, key, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    served.cert_chain_pems[0].write_to_path(str(cert))
    served.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    origin = EtagServer(_policy_json("cal-000000aa"))
    port = free_port()
    config = uvicorn.Config(
        origin.app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        _wait_for(lambda: server.started)
        code = (
            "from tokenlens.proxy.policy_store import PolicyStore\n"
            f"print(PolicyStore('https://127.0.0.1:{port}/policy.json').policy.calibration_id)\n"
        )
        env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
        trusted = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "SSL_CERT_FILE": str(ca_file)},
            capture_output=True,
            text=True,
        )
        assert trusted.returncode == 0, trusted.stderr
        assert trusted.stdout.strip() == "cal-000000aa"
        refused = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True
        )
        assert refused.returncode != 0
        assert "policy URL unreachable (ClientConnectorCertificateError)" in refused.stderr
    finally:
        server.should_exit = True
        thread.join(timeout=10)

"""The dashboard rendered by a real browser: headless Chromium (Debian's `chromium`).

The test setup installs it (`apt-get install -y chromium`); when it is missing this test
fails with that instruction rather than skipping, so CI cannot pass without looking.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from html import unescape
from pathlib import Path
from typing import Any

import anthropic
import httpx

from tokenlens.compress import compress_request
from tokenlens.compress.arms import Arm
from tokenlens.errors import CompressionError
from tokenlens.proxy.settings import ProxySettings
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, ProxyServer, messages_body
from .test_measure_judge import ScriptedJudge

StartProxy = Callable[..., ProxyServer]
HOSTILE_NOTE = "answer B drops the date <script>document.title='pwned'</script><img src=x>"


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "chromium is not installed: run `apt-get install -y chromium` (test setup)"
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _crash_on_marker(body: dict[str, Any], arm: Arm) -> Any:
    if "CRASH" in str(body["messages"][-1]["content"]):
        raise CompressionError("injected codec crash")
    return compress_request(body, arm)


def _card(dom: str, ident: str) -> str:
    match = re.search(rf'id="{ident}">([^<]*)<', dom)
    assert match, f"no #{ident} in the rendered page"
    return unescape(match.group(1))


def test_dashboard_in_headless_chromium(
    fake_anthropic: FakeAnthropic, start_proxy: StartProxy, policy_file: Path, tmp_path: Path
) -> None:
    judge = ScriptedJudge(90.0, 45.0, HOSTILE_NOTE)
    proxy = start_proxy(
        ProxySettings(
            upstream=fake_anthropic.base_url,
            policy_path=policy_file,
            measure=True,
            judge=True,
            judge_sample=1.0,
            judge_min_pairs=3,
        ),
        compressor=_crash_on_marker,
        judge_factory=lambda headers: judge,
    )
    client = anthropic.Anthropic(api_key=KEY, base_url=proxy.base_url, max_retries=0)
    for _ in range(3):  # judged at 50 %: extraction falls back to safe
        client.messages.create(**messages_body())
        proxy.wait_idle()
    client.messages.create(**messages_body("Summarize the report in two sentences."))
    client.messages.create(**messages_body("Who manages region 7? CRASH"))  # a fail-open
    proxy.wait_idle()
    feed = proxy.feed()

    page = f"{proxy.base_url}/tokenlens/"
    dom = chromium("--dump-dom", page, tmp=tmp_path).stdout
    shot = tmp_path / "dashboard.png"
    chromium(f"--screenshot={shot}", "--window-size=1400,1100", page, tmp=tmp_path)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

    # The rendered numbers are the feed's numbers.
    assert _card(dom, "tokens-saved") == f"{feed['savings']['tokens_saved']:,}"
    assert feed["savings"]["tokens_saved"] > 0
    assert _card(dom, "dollars-saved") == f"${feed['savings']['dollars_saved']:,.4f}"
    assert _card(dom, "quality-retained") == "50.0%"
    assert _card(dom, "requests") == "5"
    assert _card(dom, "fail-opens") == "1"
    assert "error:CompressionError: 1" in dom
    # The class that regressed says so, and runs on safe now.
    row = re.search(r'<tr class="fallback" data-class="extraction">(.*?)</tr>', dom, re.DOTALL)
    assert row, "the extraction row is not marked as fallen back"
    assert "FALLBACK: live retention 50%" in row.group(1) and "<td>safe</td>" in row.group(1)
    assert re.search(r'data-class="summarization">.*?provisional not allowed', dom, re.DOTALL)
    # The hostile judge note is shown as text, never run.
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x&gt;" in dom
    assert "<script>" not in dom and "<img" not in dom
    assert "<title>TokenLens proxy</title>" in dom  # the title was not rewritten
    # The page forbids scripts anyway.
    headers = httpx.get(page).headers
    assert "default-src 'none'" in headers["content-security-policy"]

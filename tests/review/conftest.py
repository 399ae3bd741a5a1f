"""Fixtures of the review tests: one finished loopback calibration per session, the review
page served by uvicorn on 127.0.0.1, and headless Chromium driven over DevTools.

The calibration runs the plain stage functions of `tokenlens.calibration` against the
loopback Anthropic server (no Prefect: the review reads only the tables the stages write),
with `--judge both`, so the metric judge is there as a third rater.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from tokenlens.config import CalibrationConfig
from tokenlens.testing import FakeAnthropic

CLASSES = ("extraction", "numeric-reasoning")


@dataclass(frozen=True)
class LoopbackRun:
    config: CalibrationConfig
    run_id: str

    @property
    def store(self) -> Path:
        return Path(self.config.store)


@pytest.fixture(scope="session")
def loopback_run(
    anthropic_server: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> LoopbackRun:
    """A finished calibration: 2 classes x 2 tasks x 2 repeats x (control, safe, prune@0.6)."""
    from tokenlens.calibration import stages
    from tokenlens.calibration.session import open_calibration

    root = tmp_path_factory.mktemp("review-run")
    config = CalibrationConfig(
        backend="anthropic",
        model="claude-haiku-4-5",
        classes=CLASSES,
        max_tasks_per_class=2,
        methods=("safe", "prune"),
        rates=(0.6,),
        repeats=2,
        judge="both",
        concurrency=4,
        store=root / "store",
        reports=root / "reports",
        max_tokens=512,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url)
        patch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        cal, tasks = open_calibration(config)
        stages.load_stage(config, cal.store, tasks, cal.model)
        compressions = stages.compress_stage(cal, tasks)
        answers = stages.sample_stage(cal, tasks, compressions)
        grades = stages.judge_stage(cal, tasks, compressions, answers)
        curve = stages.aggregate_stage(cal, grades)
        stages.publish_stage(cal, curve, grades, list(CLASSES))
    return LoopbackRun(config, cal.store.run_id)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ThreadServer:
    """An ASGI app served by uvicorn on 127.0.0.1 in a daemon thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("review server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class Browser:
    """Headless Chromium, one tab, driven over the DevTools protocol (websockets client).

    The proxy's dashboard test only needs `--dump-dom`; a reviewer has to type, press keys
    and submit forms, which takes DevTools.
    """

    def __init__(self, tmp: Path) -> None:
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        assert binary, "chromium is not installed: run `apt-get install -y chromium` (test setup)"
        profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
        self.process = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1300,1000",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        page = next(t for t in targets if t["type"] == "page")
        from websockets.sync.client import connect

        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None)
        self._ids = count(1)
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, predicate: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"document.readyState === 'complete' && ({predicate})"):
            if time.monotonic() > deadline:
                raise AssertionError(f"page never satisfied {predicate!r}: {self.url()}")
            time.sleep(0.05)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for(f"location.href.startsWith({json.dumps(url.split('?')[0])})")

    def url(self) -> str:
        return str(self.evaluate("location.href"))

    def press(self, key: str) -> None:
        """A key press as a person makes it (keydown, char, keyup)."""
        special = {"Enter": 13, "Escape": 27}
        if key in special:
            code = special[key]
            base = {"key": key, "code": key, "windowsVirtualKeyCode": code}
            self.call("Input.dispatchKeyEvent", type="rawKeyDown", **base)
            if key == "Enter":
                self.call("Input.dispatchKeyEvent", type="char", text="\r", **base)
            self.call("Input.dispatchKeyEvent", type="keyUp", **base)
            return
        base = {"key": key, "code": f"Key{key.upper()}", "windowsVirtualKeyCode": ord(key.upper())}
        self.call("Input.dispatchKeyEvent", type="keyDown", text=key, **base)
        self.call("Input.dispatchKeyEvent", type="keyUp", **base)

    def type(self, text: str) -> None:
        self.call("Input.insertText", text=text)

    def dom(self) -> str:
        return str(self.evaluate("document.documentElement.outerHTML"))

    def text(self) -> str:
        return str(self.evaluate("document.body.innerText"))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """`browser()` opens a fresh headless Chromium; all are closed after the test."""
    opened: list[Browser] = []

    def make() -> Browser:
        instance = Browser(tmp_path)
        opened.append(instance)
        return instance

    yield make
    for instance in opened:
        instance.close()


def numbers_in(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


@pytest.fixture
def run_copy(loopback_run: LoopbackRun, tmp_path: Path) -> LoopbackRun:
    """The finished calibration copied for one test, so each review starts from nothing."""
    root = tmp_path / "copy"
    shutil.copytree(loopback_run.config.store, root / "store")
    shutil.copytree(loopback_run.config.reports, root / "reports")
    config = loopback_run.config.model_copy(
        update={"store": root / "store", "reports": root / "reports"}
    )
    return LoopbackRun(config, loopback_run.run_id)

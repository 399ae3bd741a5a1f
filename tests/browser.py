"""Headless Chromium over the DevTools protocol, shared by the browser tests (the review
page, the calibration report). Debian's `chromium`; scripts/setup-test.sh installs it."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from itertools import count
from pathlib import Path
from typing import Any

import httpx

# What DevTools answers an evaluation that meets a page being replaced by the next one.
_NAVIGATING = (
    "Inspected target navigated or closed",
    "Execution context was destroyed",
    "Cannot find context with specified id",
)


class Browser:
    """Headless Chromium, one tab, driven over the DevTools protocol (websockets client).

    The proxy's dashboard test only needs `--dump-dom`; a reviewer has to type, press keys
    and submit forms, and the report test measures the laid-out page, which takes DevTools.
    """

    def __init__(self, tmp: Path, *, window: tuple[int, int] = (1300, 1000)) -> None:
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
                f"--window-size={window[0]},{window[1]}",
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
        """Poll `predicate` on the page until it holds. A poll that lands while the page
        navigates (after a form's submit) finds no page to run in: that is "not yet"."""
        deadline = time.monotonic() + timeout
        while not self._holds(f"document.readyState === 'complete' && ({predicate})"):
            if time.monotonic() > deadline:
                raise AssertionError(f"page never satisfied {predicate!r}: {self.url()}")
            time.sleep(0.05)

    def _holds(self, expression: str) -> bool:
        try:
            return bool(self.evaluate(expression))
        except RuntimeError as error:
            if any(sign in str(error) for sign in _NAVIGATING):
                return False
            raise

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

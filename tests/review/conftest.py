"""Fixtures of the review tests: one finished loopback calibration per session, the review
page served by uvicorn on 127.0.0.1, and headless Chromium driven over DevTools.

The calibration runs the plain stage functions of `tokenlens.calibration` against the
loopback Anthropic server (no Prefect: the review reads only the tables the stages write),
with `--judge both`, so the metric judge is there as a third rater.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.browser import Browser
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
        grades = stages.pay_stage(cal, tasks, compressions).grades
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

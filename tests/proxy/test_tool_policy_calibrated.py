"""End to end: a calibration over agent tasks publishes per-kind tool-output arms it
decided itself, and the proxy applies them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from tests.calibration.test_agent_calibration import agent_config, run
from tokenlens.compress import compress_request
from tokenlens.compress.arms import Arm
from tokenlens.policy import Policy, load_policy
from tokenlens.proxy.settings import ProxySettings
from tokenlens.tasks import load_tasks
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, ProxyServer

HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


@pytest.fixture
def calibrated(tmp_path: Path, anthropic: FakeAnthropic) -> tuple[Policy, Path]:
    """A calibration of two agent classes with the default ladder's tool rungs."""
    config = agent_config(
        tmp_path,
        classes=("agent-vcs", "agent-file-read"),
        max_tasks_per_class=8,
        shortest_tasks_first=False,
        methods=("safe",),
        tolerance=0.5,
    )
    run(config)
    latest = tmp_path / "reports" / "policy" / "latest.json"
    return load_policy(latest), tmp_path


def test_explore(calibrated: tuple[Policy, Path]) -> None:
    policy, root = calibrated
    for k, v in policy.tool_output.items():
        print(k, v.verdict, v.method, v.rate, v.n_tasks, v.reason)
    tables = list((root / "store" / "runs").glob("*/tool_curve.parquet"))
    for r in pq.read_table(tables[0]).to_pylist():
        print(r["task_class"], r["arm"], r["status"], r["n_tasks"], r["reduction"], r["retention"], r["facts_lost"])
    print({k: (v.method, v.reason) for k, v in policy.classes.items()})
    assert False

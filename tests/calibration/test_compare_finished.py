"""`tokenlens compare` given a calibration id compares its newest *finished* run and says
so; a run still running is never offered for a resume (that would pay twice beside it)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from flows.calibrate import calibrate, flow_parameters
from tokenlens.calibration.runs import start_run
from tokenlens.cli import main as cli_main
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


def test_compare_skips_a_run_in_progress_and_says_which_run_it_used(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(classes=("extraction",), methods=("safe",))
    done = calibrate(**flow_parameters(config, fail_on_unresolved=False))
    # A newer run of the same calibration is in progress (this process stands for it).
    live = start_run(config, done.calibration_id, fresh_sample=True)
    assert live.pid == os.getpid() and live.status == "running"
    args = ["--store", str(config.store), "--reports", str(config.reports)]

    capsys.readouterr()
    assert cli_main(["compare", done.calibration_id, done.run_id, *args]) == 0
    out = capsys.readouterr().out
    assert f"{done.calibration_id}: newest finished run {done.run_id}" in out
    assert f"{live.run_id} is still running" in out

    assert cli_main(["compare", live.run_id, done.run_id, *args]) != 0
    err = capsys.readouterr().err
    assert f"run {live.run_id} is still running" in err
    assert "--resume" not in err

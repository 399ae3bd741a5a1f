"""Progress reaches the run's log, and an ETA after a resume counts only the calls still to
pay (ledger hits finish at once and must not make the rate look fast)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from flows.calibrate import calibrate, flow_parameters
from tokenlens.calibration.progress import LineProgress
from tokenlens.testing import FakeAnthropic


def test_the_eta_after_a_resume_counts_only_the_calls_still_to_pay() -> None:
    now = [0.0]
    lines: list[str] = []
    progress = LineProgress(every_s=10.0, clock=lambda: now[0], heartbeat=False, emit=lines.append)
    progress.start("sample", 400)
    for done in range(1, 301):  # 300 answers from the ledger, at once
        progress.advance("sample", done, 400, cached=done)
    for paid in range(1, 21):  # then one paid call every 0.5 s
        now[0] += 0.5
        progress.advance("sample", 300 + paid, 400, cached=300)
    # 20 paid calls in 10 s, 80 left to pay: 40 s (counting the hits it said 80 * 10 / 320)
    assert lines[-1] == "sample: 320/400 (80%), 120.0 per min, ETA 40s (300 needed no new call)"


def test_with_nothing_paid_yet_there_is_no_rate() -> None:
    lines: list[str] = []
    progress = LineProgress(every_s=0.0, clock=lambda: 1.0, heartbeat=False, emit=lines.append)
    progress.start("sample", 10)
    progress.advance("sample", 4, 10, cached=4)
    assert lines[-1] == "sample: 4/10 (40%), no rate yet (4 needed no new call)"


@pytest.mark.slow
def test_a_run_s_progress_lines_are_in_its_log(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    caplog.set_level(logging.INFO, logger="prefect.flow_runs")  # an operator's default
    config = make_config(classes=("extraction",), methods=("safe",))

    def sample_lines() -> list[str]:
        state = calibrate(**flow_parameters(config, fail_on_unresolved=False), return_state=True)
        flow_run_id = state.state_details.flow_run_id
        found: list[str] = []
        for _ in range(100):  # logs are written asynchronously
            with get_client(sync_client=True) as client:
                logs = client.read_logs(
                    LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
                )
            found = [log.message for log in logs]
            if any(m.startswith("judge: ") and " done in " in m for m in found):
                break
            time.sleep(0.1)
        sample = [m for m in found if m.startswith("sample: ")]
        assert sample and sample[0].endswith(" to do") and " done in " in sample[-1], found
        return sample

    first = sample_lines()
    assert "needed no new call" not in first[-1]
    again = sample_lines()  # the same run again: every answer from the ledger
    total = again[-1].split("/")[1].split()[0]  # (it grows once the arms are compressed)
    assert again[-1].startswith(f"sample: {total}/{total} done in ")
    assert again[-1].endswith(f" ({total} needed no new call)"), again

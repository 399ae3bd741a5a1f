"""`tokenlens history` / `compare` and the `calibration-trend` artifact on three scheduled-
style runs (fresh samples) where the model got worse before the last one.

The loopback model's `forget_rate` makes half its answers claim the context lacks the
information: cleartext and control answers suffer alike, so the noise floor jumps and its
interval stops overlapping the previous run's.
"""

from __future__ import annotations

from typing import Any

import pytest

from flows.calibrate import KEY_TREND, calibrate, flow_parameters
from tests.test_report import widest_table
from tokenlens.calibration.history import compare_states, history_rows, load_history
from tokenlens.cli import main as cli_main
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


def read_trend() -> str:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[KEY_TREND])),
            sort=ArtifactSort.CREATED_DESC,
        )
    assert found
    return str(found[0].data)


def test_history_and_compare_show_a_model_that_got_worse(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(
        classes=("extraction",),
        max_tasks_per_class=20,
        methods=("safe", "prune"),
        tolerance=0.9,
        concurrency=1,  # the loopback model's draws then follow one request order
    )
    params = flow_parameters(config, fresh_sample=True, fail_on_unresolved=False)
    results = []
    for forget_rate in (0.0, 0.0, 0.6):
        anthropic.configure(forget_rate=forget_rate)
        results.append(calibrate(**params))
    ids = [r.run_id for r in results]

    states = load_history(config.store, config.reports)
    assert [s.run_id for s in states] == ids
    rows = history_rows(states, "extraction")
    assert [r.run_id for r in rows] == ids
    assert not rows[1].flags, rows[1]  # same model, new sample: nothing significant
    assert "noise floor moved" in rows[2].flags
    [change] = [c for c in compare_states(states[1], states[2]) if c.task_class == "extraction"]
    assert change.significant and change.floor_moved

    capsys.readouterr()
    args = ["--store", str(config.store), "--reports", str(config.reports)]
    assert cli_main(["history", "--class", "extraction", *args]) == 0
    history = capsys.readouterr().out
    lines = [line for line in history.splitlines() if line.startswith("extraction")]
    assert [ids[i] in lines[i] for i in range(3)] == [True, True, True]
    assert "⚠" not in lines[1] and "⚠ noise floor moved" in lines[2]
    assert "3 runs; 1 significant change\n" in history

    assert cli_main(["compare", ids[1], ids[2], *args]) == 0
    compared = capsys.readouterr().out
    assert compared.splitlines()[0].startswith(f"{ids[1]} ")
    assert "⚠ extraction" in compared and "⚠ moved" in compared
    assert cli_main(["compare", ids[0], ids[1], *args]) == 0
    assert "⚠" not in capsys.readouterr().out

    trend = read_trend()  # the flow's artifact: the same rows, as a list (issue 26.12)
    assert all(run_id in trend for run_id in ids)
    assert "⚠ noise floor moved" in trend
    assert widest_table(trend) == 0  # 9 columns: a list the UI's narrow pane wraps
    assert trend.count("- **extraction** — run: ") == 3

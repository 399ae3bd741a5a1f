"""`tokenlens calibrate --reanswer` end to end (the Prefect flow in-process, the loopback
server): the extra replicates are the disagreeing cells' only, the curve and the report
read them, and the same command again pays for nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.calibration.test_flow import cli_args
from tokenlens import tables
from tokenlens.calibration.runs import list_runs
from tokenlens.cli import main as cli_main
from tokenlens.decision.reanswer import REANSWER_COUNT, cells_to_reanswer, read_with_guard
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


# The sequential design on 3 tasks a class: no look before the last (3 tasks x 3 repeats)
# can decide, so it re-answers the same cells as the fixed design.
@pytest.mark.parametrize("design", ["fixed", "sequential"])
def test_calibrate_reanswer_pays_the_disagreeing_cells_once(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    capsys: pytest.CaptureFixture[str],
    design: str,
) -> None:
    anthropic.configure(forget_rate=0.15)  # answers that now and then miss: repeats disagree
    config = make_config(
        judge="llm", repeats=3, max_tasks_per_class=3, concurrency=1, design=design
    )
    assert cli_main([*cli_args(config), "--reanswer", "--design", design]) in (0, 4)
    out = capsys.readouterr().out
    assert "re-answering adds 3 answers, each judged, for each cell whose repeats disagree" in out
    (run,) = list_runs(config.store)
    folder = Path(config.store) / "runs" / run.run_id
    assert run.config.get("reanswer") is True and run.config.get("design") == design
    grades = pq.read_table(folder / "grades.parquet").to_pandas()
    cells = cells_to_reanswer(grades, 3, judge="claude-haiku-4-5")
    assert cells, "no disagreeing cell: the test reads nothing"
    extra = grades[grades["replicate"] >= 3]
    assert set(zip(extra["task_class"], extra["task_id"], extra["arm"], strict=True)) == set(cells)
    assert len(extra) == len(cells) * REANSWER_COUNT
    # the curve counts every pair it reads: the re-answers too, but a guarded arm's
    curve = pq.read_table(folder / "curve.parquet").to_pandas()
    per_class = curve[curve["task_class"] != "__all__"]
    read, guarded = read_with_guard(grades, 3, judge="claude-haiku-4-5")
    usable = read[read["error"].isna() & (read["grade_clear"] > 0)]
    assert per_class["n_pairs"].sum() == len(usable)
    kept = {(c, a) for c, _, a in cells if a not in guarded.get(c, set())}
    assert ((usable["replicate"] >= 3).sum() > 0) == bool(kept)
    report = Path(config.reports) / "runs" / run.run_id / "calibration.md"
    assert f"Re-answered {len(cells)} cells" in report.read_text(encoding="utf-8")

    paid = sum(1 for r in anthropic.calls() if r.status == 200)
    assert cli_main([*cli_args(config), "--reanswer", "--design", design]) in (0, 4)
    assert sum(1 for r in anthropic.calls() if r.status == 200) == paid  # 0 new calls
    assert "(0 new calls this run)" in capsys.readouterr().out
    again = list_runs(config.store)[-1]
    rows = pq.read_table(Path(config.store) / "runs" / again.run_id / "grades.parquet")
    assert rows.schema.remove_metadata().equals(tables.GRADES)
    assert rows.to_pylist() == pq.read_table(folder / "grades.parquet").to_pylist()

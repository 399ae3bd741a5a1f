"""The stream that replaced the barrier between sampling and judging changed no result:
for the same seed every table and the published policy are the ones main produced before
it (`golden.py` says how `data/golden_run.json` was made)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.calibration.golden import digests, loopback_run

GOLDEN = Path(__file__).parent / "data" / "golden_run.json"


def test_tables_and_policy_are_the_ones_before_the_stream(tmp_path: Path) -> None:
    expected = json.loads(GOLDEN.read_text("utf-8"))
    found = digests(loopback_run(tmp_path))
    assert set(found) == {"tasks", "compressions", "answers", "grades", "curve", "policy"}
    changed = [name for name in expected if found.get(name) != expected[name]]
    assert not changed, f"differ from the golden run: {changed}"
    assert found["grades"]["rows"] == 88  # both judges, the control judged twice

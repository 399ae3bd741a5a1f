"""`compare` and `history` follow one rule: across a change of model, backend or judge the
readings come from another instrument, so no interval is flagged as moved."""

from __future__ import annotations

from typing import Any

import pytest

from tokenlens.calibration import history
from tokenlens.calibration.history import ClassState, Reading, RunState, compare_lines


def state(retention: float, floor: float) -> RunState:
    cls = ClassState(
        verdict="measured",
        chosen="safe",
        reduction_pct=2.0,
        floor=Reading(floor, floor - 0.01, floor + 0.01),
        arms={"safe": Reading(retention, retention - 0.01, retention + 0.01)},
        reductions={"safe": 0.02},
        gentlest="safe",
    )
    manifest: Any = type("M", (), {"calibration_id": "cal", "seed": 1, "run_id": "r"})()
    return RunState(manifest=manifest, policy=None, classes={"extraction": cls})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changed", "flagged"),
    [({}, True), ({"tolerance": "95.0% → 90.0%"}, True), ({"judge": "metric → claude"}, False)],
)
def test_moved_is_flagged_only_between_readings_of_one_instrument(
    monkeypatch: pytest.MonkeyPatch, changed: dict[str, str], flagged: bool
) -> None:
    monkeypatch.setattr(history, "settings_changes", lambda a, b: changed)
    before, after = state(0.99, 0.02), state(0.80, 0.20)  # nothing overlaps
    [change] = history.compare_states(before, after)
    assert change.significant is flagged
    text = "\n".join(compare_lines(before, after))
    assert ("⚠ moved" in text) is flagged
    assert ("not comparable" in text) is (not flagged)

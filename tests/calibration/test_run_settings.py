"""`plan`, `history` and `compare` read the settings a run used, and say when they differ.

On main before this change: `plan RUN` priced "judge metric (no paid calls)" for a run that
paid an LLM judge; `history` put runs with different judges and tolerances on one timeline
without a word (and flagged their intervals as moves); `compare` named only model and judge.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from flows.calibrate import calibrate, flow_parameters
from tokenlens.calibration.result import CalibrationResult
from tokenlens.cli import main as cli_main
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


def run(config: Any) -> CalibrationResult:
    return calibrate(**flow_parameters(config, fresh_sample=True, fail_on_unresolved=False))


def calls_column(plan: str) -> list[int]:
    """The `calls` figure of every design line (class lines with a number of calls)."""
    found = []
    for line in plan.splitlines():
        if line.startswith("extraction"):
            numbers = re.findall(r"\s(\d+)\s", line + " ")
            if len(numbers) >= 4:
                found.append(int(numbers[3]))
    return found


def test_plan_history_and_compare_name_the_settings_a_run_used(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = make_config(classes=("extraction",), methods=("safe", "prune"))
    first, second = run(base), run(base)
    llm = run(base.model_copy(update={"judge": "llm", "judge_both_orders": True, "tolerance": 0.5}))
    paths = ["--store", str(base.store), "--reports", str(base.reports)]
    capsys.readouterr()

    assert cli_main(["plan", llm.run_id, *paths]) == 0
    paid = capsys.readouterr().out
    assert "no paid calls" not in paid
    assert "judge claude-haiku-4-5 (the LLM judge this run paid for, both A/B orders)" in paid
    assert cli_main(["plan", llm.run_id, *paths, "--judge-model", "metric"]) == 0
    free = capsys.readouterr().out
    assert "judge metric (no paid calls) (--judge-model metric)" in free
    # Same designs; the paid judge's calls come on top (two per pair, both orders).
    assert calls_column(paid) and len(calls_column(paid)) == len(calls_column(free))
    assert all(p > f for p, f in zip(calls_column(paid), calls_column(free), strict=True))
    assert cli_main(["plan", first.run_id, *paths]) == 0
    assert "judge metric (no paid calls);" in capsys.readouterr().out

    assert cli_main(["history", *paths]) == 0
    history = capsys.readouterr().out
    assert "These runs were not all measured the same way" in history
    assert "judge: metric (2 runs), claude-haiku-4-5 (1 run)" in history
    assert "tolerance: 95.0% (2 runs), 50.0% (1 run)" in history
    [last] = [line for line in history.splitlines() if line.startswith(f"extraction  {llm.run_id}")]
    assert "settings changed: judge metric → claude-haiku-4-5" in last
    assert "tolerance 95.0% → 50.0%" in last and "judge_both_orders False → True" in last
    assert "not comparable with the run before (judge changed)" in last and "⚠" not in last
    [middle] = [
        line for line in history.splitlines() if line.startswith(f"extraction  {second.run_id}")
    ]
    assert "settings changed" not in middle

    assert cli_main(["compare", first.run_id, llm.run_id, *paths]) == 0
    compared = capsys.readouterr().out.splitlines()
    assert compared[1].startswith("settings changed: judge metric → claude-haiku-4-5")
    assert "tolerance 95.0% → 50.0%" in compared[1] and "judges metric → llm" in compared[1]
    assert "not comparable (judge changed)" in compared[2]
    assert not any("⚠" in line for line in compared)  # the rule `history` follows
    assert cli_main(["compare", first.run_id, second.run_id, *paths]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("settings: the same")

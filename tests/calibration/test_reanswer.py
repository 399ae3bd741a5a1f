"""`--reanswer` in the calibration: extra replicates are paid for the disagreeing cells
only, through the ledger (a stopped run resumed, or a rerun, pays for no call twice), the
tables hold every row and the curve reads the guarded ones; the sequential design
re-answers the same cells at its last look.

Against the loopback server with an LLM judge and answers that now and then say the
context lacks the information (`forget_rate`): some cells' repeats disagree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tokenlens.calibration import stages
from tokenlens.calibration.session import open_calibration
from tokenlens.calibration.stage_reanswer import Reanswered, reanswer_stage
from tokenlens.cli import main as cli_main
from tokenlens.config import CalibrationConfig
from tokenlens.decision.reanswer import REANSWER_COUNT
from tokenlens.errors import SpendLimitReached
from tokenlens.ledger import Ledger
from tokenlens.testing import FakeAnthropic

REPEATS = 3


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(seed=11, forget_rate=0.15) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
        yield fake


def config(root: Path, **overrides: Any) -> CalibrationConfig:
    fields: dict[str, Any] = {
        "backend": "anthropic",
        "model": "claude-haiku-4-5",
        "classes": ("extraction", "numeric-reasoning"),
        "max_tasks_per_class": 3,
        "methods": ("safe", "prune"),
        "rates": (0.6,),
        "repeats": REPEATS,
        "judge": "llm",
        "concurrency": 1,  # the loopback model tells identical requests apart by order
        "seed": 7,
        "store": root / "store",
        "reports": root / "reports",
        "max_tokens": 512,
        "reanswer": True,
    }
    return CalibrationConfig(**{**fields, **overrides})


def ok_calls(server: FakeAnthropic) -> int:
    return sum(1 for r in server.calls() if r.status == 200)


def run(cfg: CalibrationConfig, *, cap_after_planned: float | None = None) -> Reanswered:
    """One run through the stages; `cap_after_planned`: the spend cap the re-answering
    meets (dollars on top of what the planned calls spent)."""
    cal, tasks = open_calibration(cfg)
    compressions = stages.compress_stage(cal, tasks)
    paid = stages.pay_stage(cal, tasks, compressions)
    if cap_after_planned is not None:
        cap = cal.calls.spend.max_spend = cal.calls.spend.spent + cap_after_planned
        cal = replace(cal, config=cal.config.model_copy(update={"max_spend": cap}))
    logged: list[str] = []
    try:
        done = reanswer_stage(cal, tasks, compressions, paid, log=logged.append)
    finally:
        cal.calls.close()
    assert logged and logged[0].startswith(f"re-answering {len(done.cells)} cells (")
    curve = stages.aggregate_stage(cal, done.read)
    stages.publish_stage(cal, curve, done.read, None, None, tasks, notes=done.notes(REPEATS))
    return done


def test_extra_replicates_are_paid_for_the_disagreeing_cells_only_and_once(
    tmp_path: Path, server: FakeAnthropic
) -> None:
    cfg = config(tmp_path)
    done = run(cfg)
    assert done.cells, "the loopback run has no disagreeing cell: the test reads nothing"
    run_dir = Path(cfg.store) / "runs"
    (folder,) = run_dir.iterdir()
    grades = pq.read_table(folder / "grades.parquet").to_pylist()
    answers = pq.read_table(folder / "answers.parquet").to_pylist()
    extra = [g for g in grades if g["replicate"] >= REPEATS]
    # every re-answered cell has its REANSWER_COUNT replicates, and no other cell has any
    assert {(g["task_class"], g["task_id"], g["arm"]) for g in extra} == set(done.cells)
    assert sorted({g["replicate"] for g in extra}) == list(range(REPEATS, REPEATS + 3))
    assert len(extra) == len(done.cells) * REANSWER_COUNT
    # a fresh cleartext answer per re-answered replicate, only for the tasks re-answered
    fresh = {(a["task_id"], a["replicate"]) for a in answers if a["replicate"] >= REPEATS}
    tasks = {task for _, task, _ in done.cells}
    assert fresh == {(t, r) for t in tasks for r in range(REPEATS, REPEATS + REANSWER_COUNT)}
    assert not [a for a in answers if a["error"]] and not [g for g in grades if g["error"]]
    # the planned rows are all there too, and the report says what was re-answered
    assert sum(g["replicate"] < REPEATS for g in grades) == 2 * 3 * 3 * REPEATS
    report = next((Path(cfg.reports) / "runs").iterdir()) / "calibration.md"
    assert f"Re-answered {len(done.cells)} cells ({done.answers} more answers)" in (
        report.read_text(encoding="utf-8")
    )

    # every call the server answered is one ledger entry; a rerun pays for nothing
    paid = ok_calls(server)
    assert paid == len(list(Ledger(Path(cfg.store) / "ledger").records()))
    again = run(cfg)
    assert ok_calls(server) == paid
    assert again.cells == done.cells and again.answers == done.answers


def test_a_run_stopped_while_reanswering_is_finished_by_the_next_without_paying_twice(
    tmp_path: Path, server: FakeAnthropic
) -> None:
    cfg = config(tmp_path)
    with pytest.raises(SpendLimitReached):
        run(cfg, cap_after_planned=1e-9)  # stops after the first re-answer call
    stopped = ok_calls(server)
    done = run(cfg)
    assert done.cells
    paid = ok_calls(server)
    assert paid > stopped  # the rest of the re-answers were paid by the second run...
    # ...and none twice: every call answered is one distinct ledger entry
    assert paid == len(list(Ledger(Path(cfg.store) / "ledger").records()))


def test_the_curve_reads_a_guarded_arm_on_its_planned_repeats(
    tmp_path: Path, server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tokenlens.calibration import stage_reanswer

    real = stage_reanswer.read_with_guard

    def guard_everything(grades: Any, repeats: int, **kw: Any) -> Any:
        return real(grades, repeats, guard=1.01, **kw)  # p < 1.01: every arm that derailed

    monkeypatch.setattr(stage_reanswer, "read_with_guard", guard_everything)
    cfg = config(tmp_path)
    done = run(cfg)
    assert done.guarded
    read_extra = {(g["task_class"], g["arm"]) for g in done.read if g["replicate"] >= REPEATS}
    guarded = {(c, arm) for c, arms in done.guarded.items() for arm in arms}
    assert guarded and not guarded & read_extra
    assert len(done.read) < len(done.paid.grades)
    notes = " ".join(done.notes(REPEATS))
    for task_class, arm in guarded:
        assert f"{arm} in {task_class} is read on its {REPEATS} planned repeats" in notes


def test_the_sequential_design_re_answers_the_disagreeing_cells_once_through_the_ledger(
    tmp_path: Path, server: FakeAnthropic
) -> None:
    import pandas as pd

    from tokenlens.calibration.rounds import rounds_stage
    from tokenlens.decision.reanswer import cells_to_reanswer

    def rounds() -> Any:
        cal, tasks = open_calibration(config(tmp_path, design="sequential", methods=("prune",)))
        try:
            return rounds_stage(cal, tasks, stages.compress_stage(cal, tasks))
        finally:
            cal.calls.close()

    done = rounds()
    grades = pd.DataFrame(done.grades)
    # 3 tasks a class: no look before the last (3 tasks x 3 repeats) can decide, so every
    # cell has its full repeats, and those that disagree (only they) are re-answered.
    cells = cells_to_reanswer(grades, REPEATS, judge="claude-haiku-4-5")
    assert cells, "the loopback run has no disagreeing cell: the test reads nothing"
    extra = grades[grades["replicate"] >= REPEATS]
    assert set(zip(extra["task_class"], extra["task_id"], extra["arm"], strict=True)) == set(cells)
    assert len(extra) == len(cells) * REANSWER_COUNT  # once each
    assert f"Re-answered {len(cells)} cells" in " ".join(done.notes)
    assert len(done.read) <= len(done.grades)
    paid = ok_calls(server)
    again = rounds()  # the same calibration again: every re-answer is in the ledger
    assert ok_calls(server) == paid
    assert len(again.grades) == len(done.grades)


def test_the_dry_run_says_reanswer_pays_nothing_at_one_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--store", str(tmp_path / "s"), "--reports", str(tmp_path / "r"), "--dry-run"]
    for repeats, said in (("1", "pays nothing at 1 repeat"), ("3", "re-answering adds 3")):
        assert cli_main(["calibrate", "--reanswer", "--repeats", repeats, *where]) == 0
        assert said in capsys.readouterr().out


def test_history_compares_reanswer_and_reads_a_run_from_before_it_as_off() -> None:
    from types import SimpleNamespace

    from tokenlens.calibration.run_settings import run_settings, settings_changes

    def state(config: dict[str, Any]) -> Any:
        policy = SimpleNamespace(model="m", judge="metric", tolerance=0.95, mode="interval")
        return SimpleNamespace(manifest=SimpleNamespace(config=config), policy=policy)

    before, off, on = state({}), state({"reanswer": False}), state({"reanswer": True})
    assert run_settings(before)["reanswer"] is False
    assert settings_changes(before, off) == {}
    assert settings_changes(off, on) == {"reanswer": "False → True"}

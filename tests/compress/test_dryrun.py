"""The dry run: per task x arm sizes, per-arm totals, call plan and cost; never crashes offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenlens.compress import Arm, CompressSettings, build_ladder
from tokenlens.config import CalibrationConfig
from tokenlens.dryrun import (
    CLEARTEXT,
    arm_totals,
    call_plan,
    cost_note,
    dry_run_rows,
    run_dry_run,
)

TASKS = Path(__file__).parent / "data" / "tasks.jsonl"
MODEL_FREE = ("safe", "minify", "dedup", "prune", "select")


def _config(**overrides: object) -> CalibrationConfig:
    fields: dict[str, object] = {"tasks": TASKS, "methods": MODEL_FREE, "rates": (0.8, 0.5)}
    fields.update(overrides)
    return CalibrationConfig(**fields)  # type: ignore[arg-type]


def test_rows_cover_every_task_and_arm() -> None:
    config = _config()
    rows = dry_run_rows(config)
    arms = build_ladder(MODEL_FREE, (0.8, 0.5))
    assert len(rows) == 4 * (1 + len(arms))
    for row in rows:
        if row.arm == CLEARTEXT:
            assert row.tokens and row.reduction is None
        else:
            assert row.tokens is not None and row.reduction is not None
            assert row.eligible_blocks is not None and row.total_blocks is not None
            assert row.eligible_blocks <= row.total_blocks
    prune_half = [r for r in rows if r.arm == "prune@0.5"]
    assert all((r.reduction or 0) > 0.2 for r in prune_half if r.task_class == "long-doc-qa")


def test_class_filter_and_cap() -> None:
    rows = dry_run_rows(_config(classes=("long-doc-qa",), max_tasks_per_class=2))
    assert sorted({r.task_id for r in rows}) == ["deploy-01", "deploy-02"]


def distinct_answers(rows: list[Any], repeats: int) -> int:
    """Answers a run asks per its design: per task and replicate the cleartext answer and
    one second answer per distinct body (an arm that changes nothing shares the control's)."""
    total = 0
    for task_id in {r.task_id for r in rows}:
        mine = [r for r in rows if r.task_id == task_id and r.arm != CLEARTEXT]
        bodies = {r.body_json for r in mine if not r.unavailable}
        clear = json.dumps(
            next(t for t in _config().selected_tasks() if t.id == task_id).to_request(
                model="local", max_tokens=512
            ),
            sort_keys=True,
        )
        total += repeats * (1 + len(bodies | {clear}))
    return total


def test_call_plan_counts(tmp_path: Path) -> None:
    n_arms = len(build_ladder(MODEL_FREE, (0.8, 0.5)))
    metric = _config(repeats=3, store=tmp_path)
    rows = dry_run_rows(metric)
    plan = call_plan(metric, rows)
    assert plan.answer_calls == distinct_answers(rows, 3) < 4 * 3 * (2 + n_arms)
    assert plan.new_answer_calls == plan.answer_calls  # nothing in the ledger yet
    assert plan.judge_calls == 0
    llm = _config(repeats=2, judge="llm", judge_both_orders=True, backend="anthropic")
    llm = llm.model_copy(update={"store": tmp_path})
    plan = call_plan(llm, dry_run_rows(llm))
    assert plan.judge_calls == 4 * 2 * (n_arms + 1) * 2  # no answer yet: the upper bound
    assert plan.usd_upper is not None and plan.usd_upper > 0
    note = cost_note(llm, plan)
    assert "claude-haiku-4-5" in note and "max_tokens" in note


def test_cost_notes_for_local_and_unknown_models(tmp_path: Path) -> None:
    local = _config(backend="local", store=tmp_path)
    assert "$0" in cost_note(local, call_plan(local, dry_run_rows(local)))
    unknown = _config(backend="anthropic", model="some-future-model", store=tmp_path)
    plan = call_plan(unknown, dry_run_rows(unknown))
    assert plan.usd_upper is None and "no price known" in cost_note(unknown, plan)


def test_totals_reduction_is_measured() -> None:
    rows = dry_run_rows(_config())
    totals = {key: (total, red) for key, _label, total, red, _note in arm_totals(rows)}
    clear = totals[CLEARTEXT][0]
    assert clear is not None
    for key, (total, red) in totals.items():
        if key != CLEARTEXT:
            assert total is not None and red == pytest.approx(1 - total / clear)
    assert totals["prune@0.5"][1] > totals["prune@0.8"][1]  # type: ignore[operator]


@pytest.mark.slow
def test_dry_run_prints_and_survives_missing_llmlingua_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = _config(
        methods=(*MODEL_FREE, "llmlingua2"),
        llmlingua_model="microsoft/llmlingua-2-bert-base-multilingual-cased-not-cached",
    )
    assert run_dry_run(config) == 0
    out = capsys.readouterr().out
    assert "Unavailable because: cannot load" in out and "HF_HUB_OFFLINE" in out
    assert "answer calls" in out and "Estimated cost" in out and "cl100k_base" in out
    assert "deploy-01" in out and "prune r=0.5" in out
    rows = dry_run_rows(config, settings=CompressSettings(llmlingua_model=config.llmlingua_model))
    lingua_rows = [r for r in rows if r.arm.startswith("llmlingua2")]
    assert lingua_rows and all(r.unavailable for r in lingua_rows)
    plan = call_plan(config, rows)
    assert plan.answer_calls == distinct_answers(rows, config.repeats)  # unavailable: not counted
    assert Arm.parse("llmlingua2@0.5").key in {r.arm for r in lingua_rows}


def test_exact_counts_come_from_count_tokens_when_a_key_is_configured(
    fake_anthropic: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a key and the Anthropic backend, each row also carries count_tokens' figure."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    config = _config(methods=("safe", "prune"), rates=(0.5,), backend="anthropic")
    assert run_dry_run(config) == 0
    out = capsys.readouterr().out
    assert "count_tokens" in out and "exact" in out
    counted = fake_anthropic.calls("/v1/messages/count_tokens")
    assert len(counted) == 4 * 3  # 4 tasks x (cleartext, safe, prune@0.5)
    assert not fake_anthropic.calls("/v1/messages")  # a dry run never asks for an answer


def test_dry_run_says_what_the_design_can_certify(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenlens.dryrun import design_power_lines

    small = design_power_lines(_config(), dry_run_rows(_config()))
    assert "a ? needs >= 20 tasks per class, a ✓ >= 60" in small[0]
    assert all("nothing — " in line and "is below the 20" in line for line in small[1:-1])
    # the written part of the starter set (20 per class): a fixed sample, not the whole set
    written = Path(__file__).parents[2] / "tasks_data" / "starter" / "00-written.jsonl"
    starter = _config(tasks=written)
    rows = dry_run_rows(starter.model_copy(update={"classes": ("extraction",)}))
    lines = design_power_lines(starter, rows)
    assert (
        "extraction" in lines[1] and "20 tasks x 3: an arm only if its true retention" in lines[1]
    )

"""How a run's tasks are dealt into shards, a shard refusing a worker that sees another
calibration, and a shard's use of the shared ledger (no Prefect server; calls go to the
loopback Anthropic server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenlens.calibration.session import open_calibration
from tokenlens.calibration.shards import (
    ShardError,
    ShardSpec,
    open_shard,
    pay_shard,
    plan_shards,
)
from tokenlens.ledger import Ledger
from tokenlens.tasks import load_tasks, task_files
from tokenlens.testing import FakeAnthropic


def test_every_task_lands_in_one_shard_counts_within_one_long_prompts_spread() -> None:
    tasks = load_tasks()[:23]
    size = {task.id: len(task.context) for task in tasks}
    specs = plan_shards(tasks, 4, weight=lambda t: size[t.id])
    dealt = [task_id for spec in specs for task_id in spec.task_ids]
    assert sorted(dealt) == sorted(t.id for t in tasks)  # each exactly once
    counts = [len(spec.task_ids) for spec in specs]
    assert max(counts) - min(counts) <= 1
    longest = sorted(tasks, key=lambda t: -size[t.id])[:4]
    homes = {next(s.index for s in specs if t.id in s.task_ids) for t in longest}
    assert len(homes) == 4  # the four longest prompts went to four different shards
    order = [t.id for t in tasks]
    for spec in specs:  # task-file order within a shard; same input, same shards
        assert list(spec.task_ids) == sorted(spec.task_ids, key=order.index)
    assert plan_shards(tasks, 4, weight=lambda t: size[t.id]) == specs


def test_more_shards_than_tasks_gives_one_task_each() -> None:
    tasks = load_tasks()[:3]
    specs = plan_shards(tasks, 8)
    assert [len(s.task_ids) for s in specs] == [1, 1, 1] and {s.count for s in specs} == {3}
    with pytest.raises(ShardError, match="at least 1"):
        plan_shards(tasks, 0)


def test_a_worker_with_another_task_file_refuses_the_shard(
    make_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    config = make_config()
    cal, selected = open_calibration(config)
    spec = plan_shards(selected, 2)[0]
    other = tmp_path / "other.jsonl"
    lines = [line for file in task_files(config.tasks) for line in file.read_text().splitlines()]
    rows = [json.loads(line) for line in lines if line]
    for row in rows:  # the worker's copy has one reference edited
        if row["id"] == selected[0].id:
            row["reference"] += " (edited)"
    other.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    moved = cal.config.model_copy(update={"tasks": other})
    with pytest.raises(ShardError, match=r"task file .* differs from the parent's"):
        open_shard(moved, spec, run_id=cal.store.run_id, calibration_id=cal.calibration_id)
    mine, tasks = open_shard(
        cal.config, spec, run_id=cal.store.run_id, calibration_id=cal.calibration_id
    )
    assert [t.id for t in tasks] == list(spec.task_ids) and mine.run is None
    unknown = ShardSpec(0, 1, ("no-such-task",))
    with pytest.raises(ShardError, match="no-such-task"):
        open_shard(cal.config, unknown, run_id=cal.store.run_id, calibration_id=cal.calibration_id)


def test_a_shard_leaves_the_shared_ledger_to_its_parent_to_compact(
    anthropic: FakeAnthropic, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard pays for its calls (each durable as it returns, stamped with the parent's
    run) and never rewrites the whole shared ledger: the parent compacts once, after every
    shard is done (before, each shard compacted it at the end of each stage)."""
    from tokenlens import ledger_store

    compactions: list[str] = []
    real = ledger_store.JournalStore.compact

    def counted(self: Any, known: Any) -> Any:
        compactions.append(str(self.root))
        return real(self, known)

    monkeypatch.setattr(ledger_store.JournalStore, "compact", counted)
    config = make_config(repeats=1)
    cal, selected = open_calibration(config)
    spec = plan_shards(selected, 2)[0]
    mine, tasks = open_shard(
        cal.config, spec, run_id=cal.store.run_id, calibration_id=cal.calibration_id
    )
    result = pay_shard(mine, spec, tasks)
    assert result.new_calls > 0 and compactions == []
    stored = Ledger(cal.store.ledger_dir).paid_by(cal.store.run_id)
    assert len(stored) == result.new_calls  # durable, and the parent's run paid for them


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shards": 0}, "shards.*greater than or equal to 1"),
        ({"shards": 2, "design": "sequential"}, "sequential design decides each round"),
    ],
)
def test_the_flow_refuses_shards_it_cannot_run(
    prefect_api: str, make_config: Any, options: dict[str, Any], message: str
) -> None:
    """Refused before anything runs: by Prefect's check of the parameters (the model's
    bounds) or by the model's own rule."""
    from flows.calibrate import calibrate, flow_parameters

    with pytest.raises(Exception, match=message):
        calibrate(**{**flow_parameters(make_config()), **options})

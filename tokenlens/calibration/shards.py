"""One calibration's paid work split into shards that any worker can run.

A shard is a chunk of the run's tasks, across classes. It compresses its tasks, obtains
every answer and LLM judge call of those tasks through the shared call ledger, and writes
nothing else: the run's tables, aggregate and policy stay the parent's job, which then
runs the ordinary stages and finds every call in the ledger (0 new calls).

Why the unit is a task (chunked across classes), not a class or an arm group:

- every cell of one task is in one shard, so the cells that share a paid call (the
  replicate's cleartext answer that every pair of the task is judged against, and an arm
  whose compressed body equals the cleartext, which shares the control's answer) are
  never asked by two workers at once: sharding by arm would make workers race for the
  same baseline answers and pay some twice (the ledger keeps both, see docs/object-storage.md);
- every task costs the same number of calls (repeats x (arms + 2) answers, the pairs to
  judge), so dealing tasks out evenly balances calls, while classes can differ in size
  (a harvested file may hold 60 tasks of one class and 8 of another) and there may be
  fewer classes than workers;
- what still varies is a call's length, so tasks are dealt longest prompt first, each to
  the shard with the fewest tasks so far, then the fewest prompt tokens: counts differ by
  at most one and long prompts are spread.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass

from tokenlens.calibration.context import Calibration, answer_model, calibration_key
from tokenlens.calibration.result import ShardResult
from tokenlens.calibration.runner import Progress
from tokenlens.calibration.session import assemble
from tokenlens.calibration.stage_compress import compress_stage
from tokenlens.calibration.stage_load import request_tokens, select_tasks
from tokenlens.calibration.stage_pay import pay_stage
from tokenlens.config import CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.models.base import ModelClient
from tokenlens.tasks import CalibrationTask


class ShardError(TokenLensError):
    """A shard cannot run here (other tasks or settings than its parent), or shards failed."""


@dataclass(frozen=True)
class ShardSpec:
    """Shard `index` (0-based) of `count`: the ids of the tasks it pays for."""

    index: int
    count: int
    task_ids: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"shard {self.index + 1}/{self.count}"


def plan_shards(
    tasks: list[CalibrationTask],
    count: int,
    *,
    weight: Callable[[CalibrationTask], int] | None = None,
) -> list[ShardSpec]:
    """Deal the tasks into at most `count` non-empty shards (see the module docstring).

    `weight` is a task's prompt size (default: its estimated prompt tokens). Deterministic:
    the same tasks always give the same shards, in task-file order within a shard.
    """
    if count < 1:
        raise ShardError(f"shards must be at least 1, got {count}")
    size = weight or _prompt_tokens
    count = min(count, len(tasks)) or 1
    order = {task.id: i for i, task in enumerate(tasks)}
    ranked = sorted(tasks, key=lambda t: (-size(t), order[t.id]))
    chunks: list[list[str]] = [[] for _ in range(count)]
    load = [0] * count
    for task in ranked:
        target = min(range(count), key=lambda n: (len(chunks[n]), load[n], n))
        chunks[target].append(task.id)
        load[target] += size(task)
    return [
        ShardSpec(n, count, tuple(sorted(chunk, key=order.__getitem__)))
        for n, chunk in enumerate(chunks)
    ]


def _prompt_tokens(task: CalibrationTask) -> int:
    return request_tokens(task.to_request(model="m", max_tokens=16))


def open_shard(
    config: CalibrationConfig,
    spec: ShardSpec,
    *,
    run_id: str,
    calibration_id: str,
    wrap_client: Callable[[ModelClient], ModelClient] | None = None,
    progress: Progress | None = None,
) -> tuple[Calibration, list[CalibrationTask]]:
    """The shard's view of its parent's run; records no run of its own.

    `config` is the parent run's (its sample seed included). The shard checks that it sees
    the same calibration as the parent (same task file content, settings, model): a worker
    with another checkout would otherwise pay for calls the parent never looks up.
    `wrap_client` wraps the raw backend (e.g. a limit shared by every worker).
    """
    from tokenlens.models.registry import make_client

    client = make_client(config.resolved_backend(), config.model)
    if wrap_client is not None:
        client = wrap_client(client)
    selected = select_tasks(config)
    mine = calibration_key(config, selected, answer_model(config, client))
    if mine != calibration_id:
        raise ShardError(
            f"{spec.label} of run {run_id}: this worker sees calibration {mine}, the parent "
            f"{calibration_id}; its task file ({config.tasks}) or code differs from the parent's"
        )
    by_id = {task.id: task for task in selected}
    missing = [task_id for task_id in spec.task_ids if task_id not in by_id]
    if missing:
        raise ShardError(f"{spec.label}: tasks not in {config.tasks}: {', '.join(missing)}")
    cal = assemble(
        config,
        client,
        run_id=run_id,
        calibration_id=calibration_id,
        progress=progress,
        compacts=False,  # the parent compacts once, after every shard is done
    )
    return cal, [by_id[task_id] for task_id in spec.task_ids]


def pay_shard(cal: Calibration, spec: ShardSpec, tasks: list[CalibrationTask]) -> ShardResult:
    """Compress, sample and judge the shard's tasks; every paid call lands in the ledger.

    Compressed bodies are reused from the run's table when this worker can read it (a
    shared store); otherwise recomputed (compression is byte-deterministic, so the
    requests and their ledger keys are the parent's). No table is written, and the
    ledger is not compacted (`open_shard`): every call is durable the moment it returns,
    and the parent folds every shard's calls in one compaction after they are done.
    """
    compressions = compress_stage(cal, tasks, write=False)
    paid = pay_stage(cal, tasks, compressions, write=False)
    answers, grades = paid.answers, paid.grades
    return ShardResult(
        shard=spec.index,
        count=spec.count,
        tasks=len(tasks),
        host=socket.gethostname(),
        pid=os.getpid(),
        launcher_pid=os.getppid(),
        new_calls=cal.calls.spend.new_calls,
        spent_usd=round(cal.calls.spend.spent, 6),
        answers=len(answers),
        answer_errors=sum(1 for row in answers if row["error"]),
        grades=len(grades),
        grade_errors=sum(1 for row in grades if row["error"]),
    )


def reopen_ledger(cal: Calibration) -> Calibration:
    """The parent's calibration with a fresh view of the ledger, after its shards ran.

    A local ledger is read once when opened (processes do not re-read each other's
    journals on a miss), so the parent opens it again to see what the shards paid for.
    The spend meter is kept, so any call the parent still pays for is counted.
    """
    return assemble(
        cal.config,
        cal.calls.answer_client.inner,
        run_id=cal.store.run_id,
        calibration_id=cal.calibration_id,
        progress=cal.progress,
        run=cal.run,
        spend=cal.calls.spend,
    )

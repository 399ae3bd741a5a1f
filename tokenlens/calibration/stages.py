"""The stages of a calibration, in order (the Prefect flow only wraps them).

load tasks -> compress per arm -> pay (answers and grades in one stream) -> aggregate ->
publish.

Each stage is a plain function in a module of its own and writes its table (records in
`tokenlens.tables`) under the run's store folder, returning typed rows for the next one:

1. `stage_load.load_stage` — the tasks table;
2. `stage_compress.compress_stage` — the compressions table (bodies reused by content key);
3. `stage_pay.pay_stage` — the answers and grades tables: every answer call, and each
   pair's judge calls the moment both its answers exist (no barrier between the two),
   starting with the cleartext and control answers while stage 2 still runs;
   (with `--reanswer`, `stage_reanswer.reanswer_stage` then pays more answers for the
   cells whose repeats disagree, through the same stage function);
4. `stage_publish.aggregate_stage` — the curve;
5. `stage_publish.publish_stage` — the run's policy and report, then the published policy.

What they share is a `context.Calibration`; the pieces with a job of their own live
beside them (`answers`, `judging`, `cells`, `runner`, `store`, `session`, `rounds`).
"""

from __future__ import annotations

from tokenlens.calibration.answers import AnswerPlan, answer_requests
from tokenlens.calibration.context import (
    Calibration,
    Calls,
    answer_model,
    calibration_key,
    judge_name_for,
    judge_names,
)
from tokenlens.calibration.judging import LedgerJudge, build_judges, judge_salt
from tokenlens.calibration.stage_compress import (
    compress_key,
    compress_stage,
    measured_arms,
    unavailable_arms,
)
from tokenlens.calibration.stage_load import load_stage, request_tokens, select_tasks, task_hash
from tokenlens.calibration.stage_pay import Paid, pay_stage, spend_stop
from tokenlens.calibration.stage_publish import (
    Published,
    aggregate_stage,
    publish_stage,
    run_reports_dir,
)

__all__ = [
    "AnswerPlan",
    "Calibration",
    "Calls",
    "LedgerJudge",
    "Paid",
    "Published",
    "aggregate_stage",
    "answer_model",
    "answer_requests",
    "build_judges",
    "calibration_key",
    "compress_key",
    "compress_stage",
    "judge_name_for",
    "judge_names",
    "judge_salt",
    "load_stage",
    "measured_arms",
    "pay_stage",
    "publish_stage",
    "request_tokens",
    "run_reports_dir",
    "select_tasks",
    "spend_stop",
    "task_hash",
    "unavailable_arms",
]

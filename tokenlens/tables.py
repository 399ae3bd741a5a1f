"""The schema of every table the calibration writes, defined once.

Each stage of the flow writes one Parquet table under the store root; this module is
the single owner of their columns and types (bump `TABLES_VERSION` on any change).
"""

from __future__ import annotations

import pyarrow as pa

TABLES_VERSION = 3

#: One row per judged pair: a (task, arm, replicate) cell. For the control arm
#: `grade_clear` is the first cleartext answer's grade and `grade_comp` the second's.
GRADES = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("task_class", pa.string(), nullable=False),
        pa.field("arm", pa.string(), nullable=False),  # Arm.key, e.g. "prune@0.6" / "control"
        pa.field("method", pa.string(), nullable=False),
        pa.field("rate", pa.float64()),
        pa.field("replicate", pa.int32(), nullable=False),
        pa.field("judge", pa.string(), nullable=False),  # "metric" or the judge model id
        pa.field("grade_clear", pa.float64()),  # 0-100; null on error
        pa.field("grade_comp", pa.float64()),  # 0-100; null on error
        pa.field("reduction", pa.float64()),  # measured token reduction of this task x arm, 0-1
        pa.field("tokens_clear", pa.int64()),
        pa.field("tokens_comp", pa.int64()),
        pa.field("note", pa.string()),
        pa.field("error", pa.string()),  # why the row has no grades; null when fine
        # 0 (or null) = the pair's first judgement; 1 = the same pair judged again
        # (--judge-twice, control pairs), used only to split the noise floor.
        pa.field("judge_pass", pa.int32()),
    ]
)

#: One row per (class, arm) of the quality curve, written by `tokenlens.decision.aggregate`.
#: Class "__all__" pools every class (the policy's `default`). The arm "control" row holds
#: the class's noise floor. Retentions are fractions capped into 0-1 (1.0 = no loss);
#: `reduction` is 0-1.
CURVE = pa.schema(
    [
        pa.field("task_class", pa.string(), nullable=False),
        pa.field("arm", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("rate", pa.float64()),
        pa.field("judge", pa.string(), nullable=False),
        pa.field("n_tasks", pa.int32(), nullable=False),
        pa.field("n_pairs", pa.int32(), nullable=False),  # usable pairs (first judgement)
        pa.field("n_errors", pa.int32(), nullable=False),  # rows with no valid grades
        pa.field("n_broken", pa.int32(), nullable=False),  # cleartext graded 0: left out
        pa.field("reduction", pa.float64()),  # mean measured token reduction over tasks
        pa.field("retention_mean", pa.float64()),  # capped per-pair mean: the seed's reading
        pa.field("retention", pa.float64()),  # pooled retention (tokenlens.stats), capped
        pa.field("retention_low", pa.float64()),  # one-sided 95 % bounds of `retention`
        pa.field("retention_high", pa.float64()),  # (together a 90 % interval), capped
        pa.field("sd_between", pa.float64()),  # between-task spread (for the planner)
        pa.field("sd_within", pa.float64()),  # within-task (replicate) spread
        pa.field("worst_case", pa.float64()),  # lowest per-task capped mean retention
        pa.field("noise_floor", pa.float64()),  # 1 - capped mean control retention
        pa.field("noise_floor_low", pa.float64()),  # its 95 % interval
        pa.field("noise_floor_high", pa.float64()),
        pa.field("floor_judge", pa.float64()),  # judge-inconsistency share of the floor
        pa.field("floor_sampling", pa.float64()),  # sampling-noise share of the floor
        pa.field("bar", pa.float64()),  # tolerance - noise floor (what --mode mean reads)
        pa.field("tasks_needed", pa.int64()),  # tasks a ? needs (minimum evidence)
        pa.field("tasks_needed_measured", pa.int64()),  # tasks a ✓ needs
        pa.field("passes", pa.bool_()),  # the arm clears the rule on its own
        pa.field("certain", pa.bool_()),  # it would be ✓ (enough tasks, narrow floor)
        pa.field("chosen", pa.bool_()),  # the walk's choice for the class
        # control | held | failed | ignored (passes after a failure) | not_reached
        # (fails after a failure) | no_savings | not_measured (no graded pair) |
        # unmeasurable | too_few_tasks
        pa.field("status", pa.string(), nullable=False),
    ]
)

# -- Tables of the calibration flow (owned by the flow; see tokenlens.calibration) ------------

#: One row per task in the run: what was measured, and a hash of its content.
TASKS = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("task_class", pa.string(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),  # sha256 of the task's JSON
        pa.field("request_json", pa.string(), nullable=False),  # the cleartext Messages body
        pa.field("tokens", pa.int64(), nullable=False),  # estimated prompt tokens (cl100k)
    ]
)

#: One row per (task, arm): the compressed body, or why the arm could not run.
COMPRESSIONS = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("task_class", pa.string(), nullable=False),
        pa.field("arm", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("rate", pa.float64()),
        pa.field("status", pa.string(), nullable=False),  # "ok" | "unavailable" | "error"
        pa.field("reason", pa.string()),  # why not ok; null when fine
        pa.field("cache_key", pa.string(), nullable=False),  # sha256(task, arm, settings)
        pa.field("body_json", pa.string()),  # the compressed Messages body; null unless ok
        pa.field("original_tokens", pa.int64()),
        pa.field("compressed_tokens", pa.int64()),
        pa.field("reduction", pa.float64()),  # 0-1
        pa.field("eligible_blocks", pa.int32()),
        pa.field("total_blocks", pa.int32()),
        pa.field("elapsed_ms", pa.float64()),
    ]
)

#: One row per answer cell: (task, arm, replicate, sample). Sample 0 is the cleartext
#: answer of the replicate; sample 1 is the second answer (compressed for an arm, a second
#: cleartext answer for the control arm).
ANSWERS = pa.schema(
    [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("task_class", pa.string(), nullable=False),
        pa.field("arm", pa.string(), nullable=False),  # "clear" for sample 0
        pa.field("replicate", pa.int32(), nullable=False),
        pa.field("sample", pa.int32(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("call_key", pa.string(), nullable=False),  # the ledger key
        pa.field("text", pa.string()),  # null on error
        pa.field("stop_reason", pa.string()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("cost_usd", pa.float64()),
        pa.field("latency_s", pa.float64()),
        pa.field("error", pa.string()),  # why there is no usable answer; null when fine
    ]
)

#: The call ledger compacted: one row per paid call (answer or judge), keyed by content hash.
CALLS = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # "answer" | "judge"
        pa.field("client", pa.string(), nullable=False),  # ModelClient.name
        pa.field("salt", pa.string()),  # extra key material, e.g. the judge prompt version
        pa.field("model", pa.string(), nullable=False),  # requested model
        pa.field("request_json", pa.string(), nullable=False),  # the full CompletionRequest
        pa.field("text", pa.string(), nullable=False),
        pa.field("parsed_json", pa.string()),
        pa.field("response_model", pa.string(), nullable=False),
        pa.field("stop_reason", pa.string()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
        pa.field("cache_read_tokens", pa.int64()),
        pa.field("cache_write_tokens", pa.int64()),
        pa.field("cost_usd", pa.float64()),  # null when the model has no price
        pa.field("latency_s", pa.float64()),
        pa.field("backend", pa.string()),
        pa.field("created", pa.string(), nullable=False),  # ISO 8601 UTC
    ]
)

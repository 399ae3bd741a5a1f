"""Every table the calibration writes: one typed record per table, its Arrow schema derived.

Each stage of the flow writes one Parquet table under the store root; this module is
the single owner of their columns and types (bump `TABLES_VERSION` on any change). A
table is declared once, as a record (`GradeRow`, ...); its schema (`GRADES`, ...) is
derived from the record by `arrow_schema`: field order, Arrow type (`Int32`/`Int64` say
the integer width) and nullability (`X | None`), so the two cannot drift apart.

Why `TypedDict` rather than dataclasses or pydantic models: a row stays the plain dict that
`pa.Table.from_pylist`, `pd.DataFrame` and `to_pylist` already speak, so the stages keep
their behaviour and cost (no conversion per row, no validation pass over thousands of
rows: the Arrow write checks the types), while mypy checks every key, in a row literal
(a missing, extra or misspelled field fails) and in every `row["..."]` read or write.
"""

from __future__ import annotations

import types
from typing import Annotated, Literal, TypedDict, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

TABLES_VERSION = 4

#: Integer columns say their Arrow width; `str`, `float` and `bool` map one to one.
Int32 = Annotated[int, pa.int32()]
Int64 = Annotated[int, pa.int64()]

_PLAIN: dict[object, pa.DataType] = {str: pa.string(), float: pa.float64(), bool: pa.bool_()}


def arrow_schema(record: type) -> pa.Schema:
    """The Arrow schema of a record: its fields in order; `X | None` is nullable."""
    fields = []
    for name, hint in get_type_hints(record, include_extras=True).items():
        nullable = False
        if get_origin(hint) in (Union, types.UnionType):
            rest = [arg for arg in get_args(hint) if arg is not type(None)]
            if len(rest) != 1:
                raise TypeError(f"{record.__name__}.{name}: {hint!r} is not `X` or `X | None`")
            hint, nullable = rest[0], True
        fields.append(pa.field(name, _arrow_type(record, name, hint), nullable=nullable))
    return pa.schema(fields)


def _arrow_type(record: type, name: str, hint: object) -> pa.DataType:
    if get_origin(hint) is Annotated:
        marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, pa.DataType)]
        if len(marks) == 1:
            return marks[0]
    elif get_origin(hint) is Literal and all(isinstance(v, str) for v in get_args(hint)):
        return pa.string()
    elif hint in _PLAIN:
        return _PLAIN[hint]
    raise TypeError(
        f"{record.__name__}.{name}: no Arrow type for {hint!r} (use str, float, bool, "
        "a Literal of strings, Int32 or Int64)"
    )


class GradeRow(TypedDict):
    """One row per judged pair: a (task, arm, replicate) cell. For the control arm
    `grade_clear` is the first cleartext answer's grade and `grade_comp` the second's."""

    task_id: str
    task_class: str
    arm: str  # Arm.key, e.g. "prune@0.6" / "control"
    method: str
    rate: float | None
    replicate: Int32
    judge: str  # "metric" or the judge model id
    grade_clear: float | None  # 0-100; null on error
    grade_comp: float | None  # 0-100; null on error
    reduction: float | None  # measured token reduction of this task x arm, 0-1
    tokens_clear: Int64 | None
    tokens_comp: Int64 | None
    note: str | None
    error: str | None  # why the row has no grades; null when fine
    # 0 (or null) = the pair's first judgement; 1 = the same pair judged again
    # (--judge-twice, control pairs), used only to split the noise floor.
    judge_pass: Int32 | None
    # The fidelity check of the arm's compressed tool output (`tokenlens.fidelity`); null
    # for the control, for arms that did not run, and in tables written before.
    fabricated_lines: Int64 | None
    unmarked_drops: Int64 | None
    facts_lost: Int64 | None


GRADES = arrow_schema(GradeRow)


class CurveRow(TypedDict):
    """One row per (class, arm) of the quality curve, written by `tokenlens.decision.aggregate`.
    Class "__all__" pools every class (the policy's `default`). The arm "control" row holds
    the class's noise floor. Retentions are fractions capped into 0-1 (1.0 = no loss);
    `reduction` is 0-1."""

    task_class: str
    arm: str
    method: str
    rate: float | None
    judge: str
    n_tasks: Int32
    n_pairs: Int32  # usable pairs (first judgement)
    n_errors: Int32  # rows with no valid grades
    n_broken: Int32  # cleartext graded 0: left out
    reduction: float | None  # mean measured token reduction over tasks
    retention_mean: float | None  # capped per-pair mean: the seed's reading
    retention: float | None  # pooled retention (tokenlens.stats), capped
    retention_low: float | None  # one-sided bounds of `retention` at `bound_level`
    retention_high: float | None  # (95 %: together a 90 % interval), capped
    sd_between: float | None  # between-task spread (for the planner)
    sd_within: float | None  # within-task (replicate) spread
    worst_case: float | None  # lowest per-task capped mean retention
    noise_floor: float | None  # 1 - capped mean control retention
    noise_floor_low: float | None  # its 95 % interval
    noise_floor_high: float | None
    floor_judge: float | None  # judge-inconsistency share of the floor
    floor_sampling: float | None  # sampling-noise share of the floor
    bar: float | None  # tolerance - noise floor (what --mode mean reads)
    tasks_needed: Int64 | None  # tasks a ? needs (minimum evidence)
    tasks_needed_measured: Int64 | None  # tasks a ✓ needs
    passes: bool | None  # the arm clears the rule on its own
    certain: bool | None  # it would be ✓ (enough tasks, narrow floor)
    chosen: bool | None  # the walk's choice for the class
    # control | held | failed | ignored (passes after a failure) | not_reached
    # (fails after a failure) | no_savings | not_measured (no graded pair) |
    # unmeasurable | too_few_tasks | unfaithful (a fabricated line or an unmarked drop in
    # its compressed tool output: refused whatever its grades)
    status: str
    #: One-sided confidence of each of `retention_low`/`retention_high` (0.95 in a fixed
    #: design; a sequential look spends less, e.g. 0.981). Null in curves written before.
    bound_level: float | None
    #: Derailed readings the bound did not read (`tokenlens.decision.derails`): counted
    #: in `n_pairs`, left out of `retention*`. Null for the control and in curves written
    #: before.
    n_set_aside: Int32 | None
    # The fidelity check summed over the class's tasks (`tokenlens.fidelity`); null
    # for the control, for arms that did not run, and in tables written before.
    fabricated_lines: Int64 | None
    unmarked_drops: Int64 | None
    facts_lost: Int64 | None


CURVE = arrow_schema(CurveRow)

# -- Tables of the calibration flow (owned by the flow; see tokenlens.calibration) ------------


class TaskRow(TypedDict):
    """One row per task in the run: what was measured, and a hash of its content."""

    task_id: str
    task_class: str
    content_hash: str  # sha256 of the task's JSON
    request_json: str  # the cleartext Messages body
    tokens: Int64  # estimated prompt tokens (cl100k)


TASKS = arrow_schema(TaskRow)

CompressionStatus = Literal["ok", "unavailable", "error"]


class CompressionRow(TypedDict):
    """One row per (task, arm): the compressed body, or why the arm could not run."""

    task_id: str
    task_class: str
    arm: str
    method: str
    rate: float | None
    status: CompressionStatus
    reason: str | None  # why not ok; null when fine
    cache_key: str  # sha256(task, arm, settings)
    body_json: str | None  # the compressed Messages body; null unless ok
    original_tokens: Int64 | None
    compressed_tokens: Int64 | None
    reduction: float | None  # 0-1
    eligible_blocks: Int32 | None
    total_blocks: Int32 | None
    elapsed_ms: float | None
    # The fidelity check of the arm's compressed tool output (`tokenlens.fidelity`); null
    # for the control, for arms that did not run, and in tables written before.
    fabricated_lines: Int64 | None
    unmarked_drops: Int64 | None
    facts_lost: Int64 | None


COMPRESSIONS = arrow_schema(CompressionRow)


class AnswerRow(TypedDict):
    """One row per answer cell: (task, arm, replicate, sample). Sample 0 is the cleartext
    answer of the replicate; sample 1 is the second answer (compressed for an arm, a second
    cleartext answer for the control arm)."""

    task_id: str
    task_class: str
    arm: str  # "clear" for sample 0
    replicate: Int32
    sample: Int32
    seed: Int64
    call_key: str  # the ledger key
    text: str | None  # null on error
    stop_reason: str | None
    input_tokens: Int64 | None
    output_tokens: Int64 | None
    cost_usd: float | None
    latency_s: float | None
    error: str | None  # why there is no usable answer; null when fine


ANSWERS = arrow_schema(AnswerRow)


class CallRow(TypedDict):
    """The call ledger compacted: one row per paid call (answer or judge), keyed by content
    hash."""

    key: str
    kind: str  # "answer" | "judge"
    client: str  # ModelClient.name
    salt: str | None  # extra key material, e.g. the judge prompt version
    model: str  # requested model
    request_json: str  # the full CompletionRequest
    text: str
    parsed_json: str | None
    response_model: str
    stop_reason: str | None
    input_tokens: Int64 | None
    output_tokens: Int64 | None
    cache_read_tokens: Int64 | None
    cache_write_tokens: Int64 | None
    cost_usd: float | None  # null when the model has no price
    latency_s: float | None
    backend: str | None
    created: str  # ISO 8601 UTC
    run_id: str | None  # the calibration run that paid for it (null in older ledgers)


CALLS = arrow_schema(CallRow)

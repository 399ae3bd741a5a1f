"""What one calibration run returns: the `calibrate` flow's result, typed.

A pydantic model rather than a dict read by string keys, so a caller's misspelled field is
a type error, and rather than a dataclass because Prefect serializes a pydantic model as
it is should a flow run ever persist its result (the flow does not today: results are not
persisted by default). Locations are strings, printed as the CLI shows them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ShardResult(BaseModel):
    """What one shard of a sharded run did, and where (recorded by the shard itself)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shard: int  # index, from 0
    count: int  # shards in the run
    tasks: int
    host: str
    pid: int  # the shard's process
    launcher_pid: int  # the process that started it: on a process worker, the worker
    new_calls: int  # calls this shard paid for
    spent_usd: float
    answers: int
    answer_errors: int
    grades: int
    grade_errors: int


class ShardRun(BaseModel):
    """One shard of a sharded run as the parent saw it: its flow run and its result."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    shard: int
    flow_run: str  # the flow run's name
    flow_run_id: str
    result: ShardResult | None  # None if the shard recorded no result artifact


class CalibrationResult(BaseModel):
    """One finished run: where its policy, report and tables are, what it decided and cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calibration_id: str  # what was measured (`calibration_key`)
    run_id: str  # this run of it
    seed: int  # the run's sample seed
    policy_path: str  # the run's policy.json
    report_path: str  # the run's HTML report
    store: str  # the run's table folder
    ledger: str  # the compacted call ledger
    exit_code: int  # 0, or 4 when a requested class is unresolved
    unresolved_classes: list[str]
    policy_lines: list[str]  # the seed-style one-liners of the policy
    unavailable_arms: dict[str, str]  # arm -> why it could not run here
    new_calls: int  # calls paid by this attempt (the rest came from the ledger)
    spend_line: str
    spent_usd: float
    run_calls: int  # calls the run paid over all its attempts and shards (ledger)
    run_spent_usd: float
    attempts: int  # 1, plus one per resume or retry of the run
    #: Calls an attempt sent and was killed waiting for: never in the ledger, maybe billed.
    in_flight_calls: int = 0
    estimate: str  # the spend estimate made before the first call
    shards: list[ShardRun] = []  # a sharded run's shards (empty: one process paid)

"""A run's tables and policy as plain data, without what differs between two runs of the
same seed (timings, run ids, dates, paths), for the golden test of the stages.

Kept free of the stages' API so the golden file can be made from an older tree with it
(`PYTHONPATH=TREE python tests/calibration/golden.py OUT.json`: it drives whichever stage
functions the tree has). `data/golden_run.json` was made so from main before the stream
replaced the barrier between sampling and judging (2026-12-02, commit f311945). Its
`curve` and `policy` entries were made again from main after the decision rule's bound
became skew-corrected (issue 25, merge a2bd5b5): they are computed from the grades, and
the tasks, compressions, answers and grades are still the ones made before the stream.
The `curve` digest was made again when the curve gained `n_set_aside` (2026-12-04): with
that column left out, the new curve has the old digest (checked), and nothing is set
aside in a run of 2 repeats. The `compressions`, `grades` and `curve` digests were made
again when those tables gained the fidelity columns (`fabricated_lines`, `unmarked_drops`,
`facts_lost`; 2026-12-05): with the three columns left out, each has its old digest
(checked), and the starter set has no tool output, so every count is 0. The `policy`
digest was made again when the policy file gained per-kind tool-output arms (schema 4,
`tool_output`; 2026-12-05): with `schema_version` 3 and no `tool_output`, the new policy
has the old digest (checked)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

#: Columns and keys whose values differ between two runs of the same seed.
VOLATILE = {
    "latency_s",
    "elapsed_ms",
    "run_id",
    "created",
    "created_at",
    "generated_at",
    "calibration_id",
    "started_at",
    "finished_at",
    "policy_path",
    "report_path",
}
TABLES = ("tasks", "compressions", "answers", "grades", "curve")


def golden_config(root: Path) -> Any:
    """Two classes x 2 tasks x 2 repeats, both judges and the repeated control judgement;
    one call at a time, so the loopback server sees the calls in one order."""
    from tokenlens.config import CalibrationConfig

    return CalibrationConfig(
        backend="anthropic",
        model="claude-haiku-4-5",
        classes=("extraction", "numeric-reasoning"),
        max_tasks_per_class=2,
        methods=("safe", "minify", "prune", "select"),
        rates=(0.6,),
        repeats=2,
        judge="both",
        judge_twice=True,
        concurrency=1,
        seed=7,
        store=root / "store",
        reports=root / "reports",
        max_tokens=512,
    )


def snapshot(store: Path, reports: Path, run_id: str) -> dict[str, Any]:
    """Every table of the run and its policy, volatile fields left out."""
    import pyarrow.parquet as pq

    out: dict[str, Any] = {}
    for name in TABLES:
        rows = pq.read_table(store / "runs" / run_id / f"{name}.parquet").to_pylist()
        out[name] = [_clean(row) for row in rows]
    policy = json.loads((reports / "runs" / run_id / "policy.json").read_text("utf-8"))
    out["policy"] = _clean(policy)
    return out


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 9)
    return value


def run_with_stages(root: Path) -> dict[str, Any]:
    """One calibration through the tree's stage functions (no Prefect), as a snapshot.

    Needs ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY pointing at a loopback server."""
    from tokenlens.calibration import stages
    from tokenlens.calibration.session import open_calibration

    config = golden_config(root)
    cal, tasks = open_calibration(config)
    stages.load_stage(config, cal.store, tasks, cal.model)
    compressions = stages.compress_stage(cal, tasks)
    if hasattr(stages, "pay_stage"):
        grades = stages.pay_stage(cal, tasks, compressions).grades
    else:  # the tree before the stream: two stages with a barrier between them
        answers = stages.sample_stage(cal, tasks, compressions)  # type: ignore[attr-defined]
        grades = stages.judge_stage(cal, tasks, compressions, answers)  # type: ignore[attr-defined]
    curve = stages.aggregate_stage(cal, grades)
    stages.publish_stage(cal, curve, grades, list(config.classes), None, tasks)
    return snapshot(Path(config.store), Path(config.reports), cal.store.run_id)


def digests(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per table (and the policy): its row count and the sha256 of its canonical JSON."""
    import hashlib

    out: dict[str, dict[str, Any]] = {}
    for name, value in sorted(found.items()):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        rows = len(value) if isinstance(value, list) else 1
        out[name] = {"rows": rows, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    return out


def loopback_run(root: Path) -> dict[str, Any]:
    """`run_with_stages` against a loopback server of its own (seed 11, fresh counters)."""
    import os

    from tokenlens.testing import FakeAnthropic

    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")}
    with FakeAnthropic(seed=11) as server:
        os.environ["ANTHROPIC_BASE_URL"] = server.base_url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-test-dummy"
        try:
            return run_with_stages(root)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        found = digests(loopback_run(Path(folder)))
    Path(sys.argv[1]).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", "utf-8")


if __name__ == "__main__":
    main()

"""The `calibrate` flow end to end against the loopback Anthropic server.

Acceptance points: a full run writes Parquet for every stage, a policy and the UI
artifacts; a rerun makes no model call; adding a rate only pays for that rate's cells;
20 % injected 429/529/500 faults still give every cell; a spend cap stops and resumes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flows.calibrate import (
    KEY_CURVE,
    KEY_POLICY,
    KEY_PROGRESS,
    KEY_REPORT,
    KEY_SPEND,
    calibrate,
    flow_parameters,
)
from tokenlens import tables
from tokenlens.calibration.result import CalibrationResult
from tokenlens.calibration.runs import list_runs
from tokenlens.cli import main as cli_main
from tokenlens.dryrun import call_plan, dry_run_rows
from tokenlens.errors import SpendLimitReached
from tokenlens.policy import load_policy, new_file_mode
from tokenlens.testing import FakeAnthropic

pytestmark = pytest.mark.slow


def run(config: Any, **options: Any) -> CalibrationResult:
    """The flow in-process; an unresolved class does not fail it (the configs are tiny)."""
    options.setdefault("fail_on_unresolved", False)
    return calibrate(**flow_parameters(config, **options))


SCHEMAS = {
    "tasks": tables.TASKS,
    "compressions": tables.COMPRESSIONS,
    "answers": tables.ANSWERS,
    "grades": tables.GRADES,
    "curve": tables.CURVE,
}


def answer_calls(server: FakeAnthropic) -> list[Any]:
    return [r for r in server.calls() if r.status == 200 and not r.is_judge]


def judge_calls(server: FakeAnthropic) -> list[Any]:
    return [r for r in server.calls() if r.status == 200 and r.is_judge]


def read_artifact(key: str) -> Any:
    """The newest artifact with this key (other tests in the session write the same keys)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
        )
    assert found, f"no artifact with key {key}"
    return found[0]


def distinct_answer_keys(store: Path) -> set[str]:
    rows = pq.read_table(store).to_pylist()
    return {r["call_key"] for r in rows if r["call_key"]}


def test_full_run_then_rerun_makes_no_calls(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(judge="both")
    planned = call_plan(config, dry_run_rows(config))  # what `--dry-run` says
    result = run(config)
    # The dry run, the flow's estimate and the spend line come from one plan: they agree.
    assert planned.new_answer_calls == len(answer_calls(anthropic))
    assert 0 < len(judge_calls(anthropic)) <= planned.new_judge_calls
    assert result.estimate == planned.describe()
    after = call_plan(config, dry_run_rows(config))
    assert after.new_calls == 0 and after.describe().startswith("0 new calls, $0 (")

    run_dir = Path(result.store)
    for name, schema in SCHEMAS.items():
        table = pq.read_table(run_dir / f"{name}.parquet")
        assert table.schema.remove_metadata().equals(schema), name
        assert table.num_rows > 0, name
    answers = pq.read_table(run_dir / "answers.parquet").to_pylist()
    grades = pq.read_table(run_dir / "grades.parquet").to_pylist()
    assert not [a for a in answers if a["error"]]
    assert not [g for g in grades if g["error"]]
    # 4 tasks x 2 repeats x (baseline + control + 3 arms) answers; every pair by both judges.
    assert len(answers) == 4 * 2 * 5
    assert len(grades) == 2 * 4 * 2 * 4
    assert {g["judge"] for g in grades} == {"metric", "claude-haiku-4-5"}

    # Every model call the server answered is exactly one ledger entry: nothing paid twice.
    ledger = pq.read_table(result.ledger).to_pylist()
    assert len(ledger) == len(anthropic.calls())
    assert len(answer_calls(anthropic)) == len(distinct_answer_keys(run_dir / "answers.parquet"))
    assert {r["kind"] for r in ledger} == {"answer", "judge"}

    policy = load_policy(result.policy_path)
    assert set(policy.classes) == {"extraction", "numeric-reasoning"}
    latest_path = Path(config.reports) / "policy" / "latest.json"
    latest = json.loads(latest_path.read_text())
    assert latest["calibration_id"] == policy.calibration_id == result.calibration_id
    assert latest["run_id"] == policy.run_id == result.run_id
    assert Path(result.report_path).is_file()
    # The policy is routed by the class the proxy will predict, and the report says what
    # that does to each true class ("policy as applied", with its bounds).
    report_md = Path(result.report_path).with_suffix(".md").read_text(encoding="utf-8")
    assert "## Policy as applied" in report_md and "retention as applied" in report_md
    assert result.exit_code in (0, 4)

    curve_artifact = read_artifact(KEY_CURVE)
    assert curve_artifact.type == "table"
    curve_rows = json.loads(curve_artifact.data)
    assert list(curve_rows[0])[:3] == ["class", "arm", "status"]  # status never cut off
    cells = " ".join(str(v) for row in curve_rows for v in row.values())
    assert "@" not in cells and "__all__" not in cells  # no mailto link, no bold
    extraction = [row["arm"] for row in curve_rows if row["class"] == "extraction"]
    assert extraction == ["control", "safe", "minify", "prune r=0.6"]  # ladder order
    policy_md = read_artifact(KEY_POLICY)
    assert policy_md.type == "markdown"
    for entry in policy.classes.values():
        assert entry.reason in policy_md.data
    assert read_artifact(KEY_PROGRESS).data == 100.0
    assert "Spent: " in read_artifact(KEY_SPEND).data
    report_md = read_artifact(KEY_REPORT).data
    assert "## Per class" in report_md and "## Every arm" in report_md
    assert "](data:image/png;base64," in report_md  # the plot opens from any machine
    assert "file://" not in report_md
    # Files the proxy reads get the mode a plain open() would give them (0644 under 022).
    for path in (result.policy_path, result.report_path, latest_path):
        assert Path(path).stat().st_mode & 0o777 == new_file_mode(), path

    # The planner reads the finished calibration: tasks / repeats / calls / $ per class.
    capsys.readouterr()
    args = ["plan", result.calibration_id, "--store", str(config.store)]
    assert cli_main([*args, "--reports", str(config.reports)]) == 0
    plan = capsys.readouterr().out
    assert f"Plan from calibration {result.calibration_id}" in plan
    for task_class in ("extraction", "numeric-reasoning"):
        lines = [line for line in plan.splitlines() if line.startswith(task_class)]
        assert len(lines) == 3 * 3  # three arms x repeats 1-3
        assert all("$" in line or "—" in line for line in lines)

    seen = len(anthropic.calls())
    again = run(config)
    assert len(anthropic.calls()) == seen  # the rerun made no model call at all
    assert again.new_calls == 0
    assert again.policy_lines == result.policy_lines
    # ...as a run of its own: same calibration and sample, its own tables and policy.
    assert again.calibration_id == result.calibration_id
    assert again.run_id != result.run_id and again.seed == result.seed
    assert load_policy(result.policy_path).run_id == result.run_id
    assert json.loads(latest_path.read_text())["run_id"] == again.run_id
    assert pq.read_table(run_dir / "grades.parquet").to_pylist() == grades


def test_adding_a_rate_pays_only_for_its_cells(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    first = run(make_config(methods=("safe", "prune", "select"), rates=(0.6,)))
    before = len(anthropic.calls())
    second = run(make_config(methods=("safe", "prune", "select"), rates=(0.6, 0.4)))
    new_requests = anthropic.calls()[before:]

    answers = pq.read_table(Path(second.store) / "answers.parquet").to_pylist()
    old_keys = distinct_answer_keys(Path(first.store) / "answers.parquet")
    new_cells = [a for a in answers if a["arm"] in ("prune@0.4", "select@0.4")]
    expected = {a["call_key"] for a in new_cells} - old_keys
    assert expected and len(new_requests) == len(expected)
    # ...and each new request is a compressed body of a 0.4 arm, not anything else.
    compressions = pq.read_table(Path(second.store) / "compressions.parquet").to_pylist()
    new_bodies = [
        json.loads(c["body_json"])["messages"]
        for c in compressions
        if c["arm"] in ("prune@0.4", "select@0.4")
    ]
    for request in new_requests:
        assert request.body["messages"] in new_bodies


def test_twenty_percent_faults_still_give_every_cell(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    anthropic.set_fault_rate(0.2, kinds=("429", "529", "500"), seed=7)
    result = run(make_config(judge="llm"))
    faults = [r for r in anthropic.calls() if r.status != 200]
    assert len(faults) >= 5  # the faults really happened
    answers = pq.read_table(Path(result.store) / "answers.parquet").to_pylist()
    grades = pq.read_table(Path(result.store) / "grades.parquet").to_pylist()
    assert len(answers) == 4 * 2 * 5 and not [a for a in answers if a["error"]]
    assert len(grades) == 4 * 2 * 4 and not [g for g in grades if g["error"]]
    assert all(g["grade_clear"] is not None for g in grades)


def test_spend_cap_stops_keeps_and_resumes(
    prefect_api: str, anthropic: FakeAnthropic, make_config: Any
) -> None:
    capped = make_config(max_spend=0.01, concurrency=1)
    with pytest.raises(SpendLimitReached, match="higher --max-spend"):
        run(capped)
    paid = len(anthropic.calls())
    assert 0 < paid < 4 * 2 * 5
    result = run(make_config(concurrency=1))
    unique = distinct_answer_keys(Path(result.store) / "answers.parquet")
    assert len(anthropic.calls()) == len(unique)  # the first run's calls were not repeated


def cli_args(config: Any) -> list[str]:
    """`tokenlens calibrate` with the options of a test config."""
    return [
        "calibrate", "--backend", "anthropic", "--model", str(config.model),
        "--classes", ",".join(config.classes),
        "--max-tasks-per-class", str(config.max_tasks_per_class),
        "--methods", ",".join(config.methods),
        "--rates", ",".join(map(str, config.rates)), "--repeats", str(config.repeats),
        "--judge", config.judge, "--max-tokens", str(config.max_tokens),
        "--store", str(config.store), "--reports", str(config.reports),
    ]  # fmt: skip


def test_same_command_twice_is_free_fresh_samples_make_new_calls(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = make_config(repeats=1)
    assert cli_main(cli_args(config)) in (0, 4)
    paid = len(answer_calls(anthropic))
    assert paid > 0
    capsys.readouterr()
    assert cli_main(cli_args(config)) in (0, 4)
    assert len(answer_calls(anthropic)) == paid  # the same command again: 0 calls
    second = capsys.readouterr().out
    assert "(0 new calls this run)" in second
    assert "spend:   0 new calls, $0 this run (planned: 0 new calls, $0 (" in second

    seeds = set()
    for _ in range(2):  # what the nightly does: a fresh sample per run
        before = len(answer_calls(anthropic))
        fresh = run(config, fresh_sample=True)
        made = len(answer_calls(anthropic)) - before
        assert (
            made
            == fresh.new_calls
            == len(distinct_answer_keys(Path(fresh.store) / "answers.parquet"))
        )
        seeds.add(fresh.seed)
    assert len(seeds) == 2 and config.seed not in seeds

    runs = list_runs(config.store)
    assert len(runs) == 4 and all(m.status == "finished" for m in runs)
    assert len({m.calibration_id for m in runs}) == 1  # four runs of one calibration
    for manifest in runs:  # each kept its own policy and tables
        policy = load_policy(Path(config.reports) / "runs" / manifest.run_id / "policy.json")
        assert policy.run_id == manifest.run_id
        assert (Path(config.store) / "runs" / manifest.run_id / "grades.parquet").is_file()
    latest = load_policy(Path(config.reports) / "policy" / "latest.json")
    assert latest.run_id == runs[-1].run_id


def test_a_prefect_retry_resumes_the_same_run_with_its_seeds(
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The flow run fails after paying; Prefect's retry (same flow run) reopens the run:
    same run id and sample seed, so no answer is asked twice."""
    from tokenlens.calibration import stages

    real_pay = stages.pay_stage
    failures = [RuntimeError("injected: the worker lost its disk")]

    def pay_once_failing(*args: Any, **kwargs: Any) -> Any:
        paid = real_pay(*args, **kwargs)
        if failures:
            raise failures.pop()
        return paid

    monkeypatch.setattr(stages, "pay_stage", pay_once_failing)
    config = make_config(repeats=1)
    retrying = calibrate.with_options(retries=1, retry_delay_seconds=0)
    result = retrying(**flow_parameters(config, fresh_sample=True, fail_on_unresolved=False))

    assert not failures  # the first attempt did fail
    [manifest] = list_runs(config.store)  # one run, reopened by the retry
    assert manifest.run_id == result.run_id and manifest.seed == result.seed
    assert manifest.status == "finished" and manifest.seed != config.seed
    answers = distinct_answer_keys(Path(result.store) / "answers.parquet")
    assert len(answer_calls(anthropic)) == len(answers)  # the retry asked nothing twice
    assert result.new_calls == 0  # everything came from the first attempt's ledger

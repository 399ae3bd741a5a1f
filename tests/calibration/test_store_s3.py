"""A whole calibration with its store and reports on S3 (moto's real S3 endpoint on
loopback): everything it writes lands in the bucket, a rerun pays nothing, `tokenlens
history` reads the bucket, and the proxy's policy source loads the published latest.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import s3fs

from flows.calibrate import KEY_POLICY, KEY_REPORT, calibrate, flow_parameters
from tokenlens.calibration.runs import list_runs
from tokenlens.cli import main as cli_main
from tokenlens.dryrun import call_plan, dry_run_rows
from tokenlens.ledger import Ledger
from tokenlens.policy import load_policy
from tokenlens.proxy.policy_store import PolicyStore
from tokenlens.storage import location, read_parquet
from tokenlens.testing import FakeAnthropic
from tokenlens.testing.loopback_s3 import loopback_s3, new_bucket

from .test_flow import SCHEMAS, read_artifact

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with loopback_s3() as endpoint:
        yield endpoint


def keys(root: str) -> set[str]:
    """Every object under an s3:// prefix, relative to it."""
    fs: Any = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)
    prefix = root.removeprefix("s3://")
    return {str(p)[len(prefix) + 1 :] for p in fs.find(prefix)}


def test_a_calibration_on_s3_keeps_everything_in_the_bucket(
    s3_endpoint: str,
    prefect_api: str,
    anthropic: FakeAnthropic,
    make_config: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # a stray local write would land here
    root = f"s3://{new_bucket()}/nightly"
    store, reports = f"{root}/store", f"{root}/reports"
    config = make_config(
        classes=("extraction",), methods=("safe", "prune"), repeats=1, store=store, reports=reports
    )
    params = flow_parameters(config, fail_on_unresolved=False)
    result = calibrate(**params)
    run_id, calibration_id = result.run_id, result.calibration_id
    paid = len(anthropic.calls())
    assert paid > 0 and result.new_calls == paid

    # Tables, manifest, policies, report and ledger are objects of the bucket.
    in_store, in_reports = keys(store), keys(reports)
    for name, schema in SCHEMAS.items():
        assert f"runs/{run_id}/{name}.parquet" in in_store, name
        table = read_parquet(location(f"{store}/runs/{run_id}/{name}.parquet"))
        assert table.schema.remove_metadata().equals(schema), name
        assert table.num_rows > 0, name
    assert f"runs/{run_id}/run.json" in in_store
    assert any(k.startswith("ledger/") for k in in_store)
    for name in ("policy.json", "calibration.html", "calibration.md", "calibration.png"):
        assert f"runs/{run_id}/{name}" in in_reports, name
    assert {"policy/latest.json", f"policy/{calibration_id}.json"} <= in_reports
    assert result.policy_path == f"{reports}/runs/{run_id}/policy.json"
    assert result.report_path == f"{reports}/runs/{run_id}/calibration.html"
    assert result.store == f"{store}/runs/{run_id}"
    assert list(tmp_path.iterdir()) == []  # nothing written to the local disk
    # Every paid call is one ledger record in the bucket.
    assert len(Ledger(f"{store}/ledger")) == paid
    answers = read_parquet(location(f"{store}/runs/{run_id}/answers.parquet")).to_pylist()
    assert not [a for a in answers if a["error"]]
    assert {a["call_key"] for a in answers if a["call_key"]} <= {
        r.key for r in Ledger(f"{store}/ledger").records()
    }
    # Artifacts name the objects by their s3:// URL as text: no link, never file://.
    report_md = read_artifact(KEY_REPORT).data
    assert f"`{result.report_path}`" in report_md and f"`{result.store}`" in report_md
    assert "](s3://" not in report_md and "file://" not in report_md
    assert "on the worker" not in report_md
    assert f"`{result.policy_path}`" in read_artifact(KEY_POLICY).data

    # The dry run counts what the bucket's ledger holds (peeking, no GET per key).
    assert call_plan(config, dry_run_rows(config)).new_calls == 0
    again = calibrate(**params)
    assert len(anthropic.calls()) == paid and again.new_calls == 0
    assert again.policy_lines == result.policy_lines
    assert [m.run_id for m in list_runs(store)] == [run_id, again.run_id]
    assert all(m.status == "finished" for m in list_runs(store))

    # The proxy follows the published latest.json: the second run's policy.
    latest = f"{reports}/policy/latest.json"
    proxy_view = PolicyStore(latest).policy
    assert proxy_view == load_policy(again.policy_path) == load_policy(latest)
    assert proxy_view.run_id == again.run_id
    assert json.loads(location(latest).read_text())["calibration_id"] == calibration_id

    # `tokenlens history` reads the runs from the bucket.
    capsys.readouterr()
    assert cli_main(["history", "--store", store, "--reports", reports]) == 0
    out = capsys.readouterr().out
    assert run_id in out and again.run_id in out and "2 runs" in out
    # ...and so does the planner (default: the run behind the bucket's latest.json).
    assert cli_main(["plan", "--store", store, "--reports", reports]) == 0
    assert f"Plan from calibration {again.run_id}" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []

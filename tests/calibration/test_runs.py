"""Runs of a calibration: sample seeds, manifests, resume lookup, and published file modes."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.calibration.progress import LineProgress
from tokenlens.calibration.runs import (
    find_run,
    finish_run,
    list_runs,
    reopen_run,
    start_run,
)
from tokenlens.calibration.summary import table_cell, where_markdown
from tokenlens.config import CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.policy import atomic_write_text, new_file_mode
from tokenlens.testing.workers import wait_for


@pytest.fixture
def config(tmp_path: Path) -> CalibrationConfig:
    return CalibrationConfig(store=tmp_path / "store", reports=tmp_path / "reports", seed=7)


def test_plain_runs_share_the_config_seed_fresh_runs_do_not(config: CalibrationConfig) -> None:
    first = start_run(config, "cal-aaaaaaaa")
    second = start_run(config, "cal-aaaaaaaa")
    fresh = [start_run(config, "cal-aaaaaaaa", fresh_sample=True) for _ in range(3)]
    assert first.run_id != second.run_id
    assert first.seed == second.seed == 7
    assert len({m.seed for m in fresh}) == 3 and 7 not in {m.seed for m in fresh}
    # the manifest's config carries the run's own seed: what `--resume` reruns with
    assert fresh[0].calibration_config().seed == fresh[0].seed
    assert [m.run_id for m in list_runs(config.store)] == [
        m.run_id for m in [first, second, *fresh]
    ]


def test_a_retry_of_the_same_flow_run_reopens_its_run(config: CalibrationConfig) -> None:
    run = start_run(config, "cal-aaaaaaaa", fresh_sample=True, flow_run_id="flow-run-1")
    finish_run(config.store, run, "stopped")
    again = start_run(config, "cal-aaaaaaaa", fresh_sample=True, flow_run_id="flow-run-1")
    other = start_run(config, "cal-aaaaaaaa", fresh_sample=True, flow_run_id="flow-run-2")
    assert (again.run_id, again.seed, again.status) == (run.run_id, run.seed, "running")
    assert other.run_id != run.run_id
    assert len(list_runs(config.store)) == 2


def test_find_run_by_id_by_calibration_or_newest_unfinished(config: CalibrationConfig) -> None:
    with pytest.raises(TokenLensError, match="no unfinished run"):
        find_run(config.store)
    a = finish_run(config.store, start_run(config, "cal-aaaaaaaa"), "finished")
    b = start_run(config, "cal-aaaaaaaa", fresh_sample=True)  # interrupted: still running
    c = finish_run(config.store, start_run(config, "cal-bbbbbbbb"), "finished")
    assert find_run(config.store).run_id == b.run_id
    assert find_run(config.store, a.run_id).run_id == a.run_id
    assert find_run(config.store, "cal-aaaaaaaa").run_id == b.run_id  # its newest run
    assert find_run(config.store, "cal-bbbbbbbb").run_id == c.run_id
    with pytest.raises(TokenLensError, match="no run or calibration 'nope'"):
        find_run(config.store, "nope")
    assert reopen_run(config.store, a).status == "running"


def test_a_new_run_reuses_the_previous_runs_compressed_bodies(config: CalibrationConfig) -> None:
    first = start_run(config, "cal-aaaaaaaa")
    bodies = Path(config.store) / "runs" / first.run_id / "compressions.parquet"
    bodies.write_bytes(b"stand-in for a Parquet file")
    second = start_run(config, "cal-aaaaaaaa")
    copied = Path(config.store) / "runs" / second.run_id / "compressions.parquet"
    assert copied.read_bytes() == bodies.read_bytes()
    third = start_run(config, "cal-bbbbbbbb")  # another calibration: nothing to reuse
    assert not (Path(config.store) / "runs" / third.run_id / "compressions.parquet").exists()


@pytest.fixture
def umask() -> Iterator[Any]:
    previous = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(previous)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_published_files_get_the_umasks_mode(
    umask: Any, tmp_path: Path, mask: int, mode: int
) -> None:
    umask(mask)
    target = tmp_path / "policy" / "latest.json"
    atomic_write_text(target, "{}\n")
    assert new_file_mode() == mode
    assert target.stat().st_mode & 0o777 == mode
    atomic_write_text(target, "{}\n")  # replacing keeps the same rule
    assert target.stat().st_mode & 0o777 == mode


def test_progress_lines_every_interval_with_rate_and_eta() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = LineProgress(out, every_s=30.0, clock=lambda: now[0], heartbeat=False)
    progress.start("sample", 400)
    for done in range(1, 401):
        now[0] += 0.25  # 4 calls a second: 240 per minute
        progress.advance("sample", done, 400)
    progress.finish("sample")
    lines = out.getvalue().splitlines()
    assert lines[0] == "sample: 0/400 to do"
    assert lines[1] == "sample: 120/400 (30%), 240.0 per min, ETA 1m10s"
    assert len(lines) == 1 + 3 + 1  # start, at 30/60/90 s, done
    assert lines[-1] == "sample: 400/400 done in 1m40s"


def test_progress_lines_keep_coming_while_one_call_runs_long() -> None:
    """Piped, a line is due every `every_s` even when no call finished meanwhile (one local
    answer can take longer than that on a busy machine); the default is every 10 s."""
    assert LineProgress()._every == 10.0
    out = io.StringIO()
    progress = LineProgress(out, every_s=0.2)
    progress.start("sample", 4)
    progress.advance("sample", 1, 4)

    def beats() -> int:
        return sum(line.startswith("sample: 1/4 (25%)") for line in out.getvalue().splitlines())

    # nothing advances: the heartbeat still prints (counted, however slowly it comes)
    wait_for(lambda: beats() >= 3, 60, "three heartbeat lines")
    progress.finish("sample")
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("sample: 1/4 done in")
    time.sleep(0.5)
    assert len(out.getvalue().splitlines()) == len(lines)  # nothing after finish


def test_table_cells_are_not_turned_into_links_or_bold() -> None:
    assert table_cell("prune@0.4") == "prune&#64;0.4"
    assert table_cell("__all__") == "\\_\\_all\\_\\_"
    assert table_cell("a|b") == "a\\|b"


def test_artifacts_link_a_stored_file_only_where_a_browser_opens_it() -> None:
    assert where_markdown("report", "https://h/r.html") == "[report](https://h/r.html)"
    assert where_markdown("report", "s3://b/p/r.html") == "report `s3://b/p/r.html`"
    assert where_markdown("report", "/srv/r.html") == "report `/srv/r.html` on the worker"
    assert where_markdown("report", "file:///srv/r.html") == "report `/srv/r.html` on the worker"

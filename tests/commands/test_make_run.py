"""`make run` and `scripts/calibrate.sh`: a refusal reads as a result, a failure as one, and
a script can get the calibration's own exit code (issue 26, point 8).

The real Makefile and script run in a copy of the repository's layout whose setup step
and `tokenlens` are stand-ins (the exit code is the only thing under test here; the
calibration itself is tested elsewhere).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(REPO / "scripts" / "calibrate.sh", scripts / "calibrate.sh")
    (scripts / "setup.sh").write_text("exit 0\n")
    fake = tmp_path / ".venv" / "bin" / "tokenlens"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/usr/bin/env bash\necho "tokenlens $*"\nexit "$FAKE_CODE"\n')
    fake.chmod(0o755)
    return tmp_path


def run(layout: Path, code: int, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command),
        cwd=layout,
        env={"PATH": "/usr/bin:/bin", "FAKE_CODE": str(code)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_run_reports_a_refusal_as_a_result_not_a_crash(layout: Path) -> None:
    done = run(layout, 4, "make", "run", "ARGS=--classes extraction")
    assert done.returncode == 0, done.stderr
    assert "tokenlens calibrate --classes extraction" in done.stdout
    assert "not certified (calibration exit 4" in done.stdout
    assert "scripts/calibrate.sh --classes extraction" in done.stdout
    assert "Error" not in done.stderr  # no `make: *** [run] Error 4`


@pytest.mark.parametrize("code", [1, 2, 3])
def test_make_run_fails_when_the_calibration_broke(layout: Path, code: int) -> None:
    done = run(layout, code, "make", "run")
    assert done.returncode == 2  # make's own code for a failed recipe
    assert f"Error {code}" in done.stderr


@pytest.mark.parametrize("code", [0, 2, 4])
def test_the_script_passes_the_calibrations_exit_code_through(layout: Path, code: int) -> None:
    done = run(layout, code, "bash", "scripts/calibrate.sh", "--repeats", "1")
    assert done.returncode == code
    assert "tokenlens calibrate --repeats 1" in done.stdout

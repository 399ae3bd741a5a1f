"""Bad input to `tokenlens calibrate` fails before Prefect starts: one line, exit 2.

On main before this change a malformed task line or an unknown class was reported only
after 7-13 s of flow start-up and ~30 lines of traceback, and option values pydantic
refused (`--repeats 0`) ended in a traceback. Each case runs the command in a process of
its own, which must not even import prefect.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tokenlens.errors import TaskFileError
from tokenlens.tasks import load_tasks

REPO = Path(__file__).resolve().parents[2]
PROBE = (
    "import sys\n"
    "from tokenlens.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('prefect imported' if 'prefect' in sys.modules else 'prefect not imported')\n"
    "sys.exit(code)\n"
)
GOOD = {"id": "a", "task_class": "extraction", "question": "q?", "context": "c", "reference": "r"}


def calibrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, "calibrate", "--store", str(cwd / "store"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def bad_tasks(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps(GOOD) + '\n{"id": "b", "task_class": "extraction", "context": "abc\n'
    )
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--tasks", "{bad}"], "bad.jsonl:2: malformed JSON (Unterminated string starting at "),
        (["--classes", "no-such-class"], "no tasks of class no-such-class (file has: "),
        (["--repeats", "0"], "--repeats: Input should be greater than or equal to 1 (got 0)"),
        (["--methods", "safe,bogus"], "unknown compression method 'bogus'"),
        (["--rates", "1.5"], "--rates: rate 1.5 is not a keep fraction in (0, 1)"),
        (["--resume", "no-such-run"], "no run or calibration 'no-such-run'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_prefect(
    args: list[str], expected: str, bad_tasks: Path, tmp_path: Path
) -> None:
    done = calibrate(*[a.replace("{bad}", str(bad_tasks)) for a in args], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback
    assert done.stderr.startswith("tokenlens: error: ") and expected in done.stderr
    assert "prefect not imported" in done.stdout


def test_the_json_error_names_its_column_once(bad_tasks: Path) -> None:
    with pytest.raises(TaskFileError) as caught:
        load_tasks(bad_tasks)
    message = str(caught.value)
    assert "Unterminated string starting at column" in message and "at at" not in message
    (bad_tasks.parent / "comma.jsonl").write_text('{"id": "a" "x": 1}\n')
    with pytest.raises(TaskFileError, match=r"Expecting ',' delimiter at column 12\)"):
        load_tasks(bad_tasks.parent / "comma.jsonl")

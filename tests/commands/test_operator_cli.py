"""The commands an operator types first: how `tokenlens` is reached, `tasks validate
--tasks`, and what the dry run says and counts.

On main before this change: `python3 -m tokenlens` from a checkout with a Python lacking
the dependencies died with `ModuleNotFoundError: tiktoken`; `tasks validate --tasks FILE`
was refused; the dry run sent its ~200 count_tokens calls one at a time without a word;
the offline dry run planned 3,600 calls for a run that paid 146 (it ignored the offline
defaults the run applies).
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tokenlens.dryrun
from tokenlens.cli import main
from tokenlens.config import CalibrationConfig
from tokenlens.dryrun import COUNT_CONCURRENCY
from tokenlens.testing import FakeAnthropic

REPO = Path(__file__).resolve().parents[2]


def test_python_m_tokenlens_without_its_dependencies_says_what_to_run() -> None:
    """`-S`: this interpreter without its site-packages, as a system python3 in a checkout."""
    done = subprocess.run(
        [sys.executable, "-S", "-m", "tokenlens", "eval", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "does not have tokenlens's dependencies installed (no module named" in done.stderr
    assert ".venv/bin/tokenlens" in done.stderr


def test_tasks_validate_takes_tasks_like_calibrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        '{"id": "a", "task_class": "extraction", "question": "q?", "context": "c", '
        '"reference": "r"}\n'
    )
    assert main(["tasks", "validate", "--tasks", str(mine)]) == 0
    assert f"{mine}: 1 tasks, 1 classes — OK" in capsys.readouterr().out
    assert main(["tasks", "validate", str(mine)]) == 0  # the positional path still works
    assert main(["tasks", "validate", str(mine), "--tasks", str(tmp_path / "other.jsonl")]) == 2
    assert "two task files given" in capsys.readouterr().err


def test_the_dry_run_counts_exactly_in_parallel_and_says_so(
    anthropic: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    anthropic.configure(latency_s=0.05)
    in_flight, peak, lock = 0, 0, threading.Lock()
    real = tokenlens.dryrun.exact_counter

    def watched(config: CalibrationConfig) -> Any:
        counter = real(config)
        assert counter is not None

        def count(body: dict[str, Any]) -> int:
            nonlocal in_flight, peak
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            try:
                return counter(body)
            finally:
                with lock:
                    in_flight -= 1

        return count

    monkeypatch.setattr(tokenlens.dryrun, "exact_counter", watched)
    args = ["calibrate", "--dry-run", "--backend", "anthropic", "--classes", "extraction"]
    args += ["--methods", "safe,minify,prune", "--rates", "0.6", "--store", str(tmp_path)]
    args += ["--max-tasks-per-class", "20"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    bodies = 20 * (1 + 3)
    assert f"Counting up to {bodies} prompts exactly with Anthropic's count_tokens" in err
    assert f"{COUNT_CONCURRENCY} at a time" in err and f"counted {bodies}/{bodies}" in err
    counted = anthropic.calls("/v1/messages/count_tokens")
    assert len(counted) == bodies
    assert 1 < peak <= COUNT_CONCURRENCY  # in parallel, and bounded
    assert "Exact column" in out


def _answer_calls(text: str) -> int:
    found = re.search(r"-> ([\d,]+) answer calls", text)
    assert found, text
    return int(found.group(1).replace(",", ""))


@pytest.mark.slow
def test_the_offline_dry_run_plans_the_calls_the_offline_run_pays(
    prefect_api: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """On the embedded local model (no key): the dry run applies the same offline defaults
    as the run (one repeat, greedy answers, ...), so the calls it plans are the calls paid."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    narrow = ["--classes", "extraction", "--max-tasks-per-class", "1", "--methods", "safe"]
    narrow += ["--max-tokens", "32"]  # shorter answers: the test is about counts, not text
    assert main(["calibrate", "--dry-run", *narrow]) == 0
    out, err = capsys.readouterr()
    assert "Offline default scope" in err and "1 repeat" in err
    planned = _answer_calls(out)
    started = time.monotonic()
    assert main(["calibrate", *narrow]) in (0, 4)
    out = capsys.readouterr().out
    paid = re.search(r"\((\d+) new calls this run\)", out)
    assert paid, out
    assert int(paid.group(1)) == planned, f"{time.monotonic() - started:.0f} s"


def test_max_policy_age_is_an_option_of_calibrate(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenlens.cli import build_parser
    from tokenlens.commands.calibrate import config_from_args

    parser = build_parser()
    ages = [
        config_from_args(parser.parse_args(["calibrate", *extra])).max_policy_age
        for extra in ([], ["--max-policy-age", "3"], ["--max-policy-age", "none"])
    ]
    assert ages == [7.0, 3.0, None]
    assert main(["calibrate", "--max-policy-age", "0", "--dry-run"]) == 2
    assert "--max-policy-age: Input should be greater than 0" in capsys.readouterr().err

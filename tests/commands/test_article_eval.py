"""The article's `eval` lines, typed as printed, run today's `calibrate`.

The article ("You Can't Compress What You Can't Grade") prints three `tokenlens eval`
lines. `eval` is `calibrate`, `--class` is `--classes`, `--judge-model` asks for the LLM
judge and `--out FILE` writes a copy of the published policy (what `serve --eval-report
FILE` reads). The free line runs as printed; the paid ones run dry or against the loopback
Anthropic server, narrowed by options appended after the printed line.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tokenlens.cli import build_parser, main
from tokenlens.commands.calibrate import config_from_args
from tokenlens.policy import load_policy
from tokenlens.testing import FakeAnthropic

LINE_DRY = "python3 -m tokenlens eval --dry-run"
LINE_ONE_CLASS = "python3 -m tokenlens eval --class numeric-reasoning --rates 0.6"
LINE_FULL = (
    "python3 -m tokenlens eval --rates 0.8,0.6,0.4 --repeats 3 --model claude-haiku-4-5 "
    "--judge-model claude-haiku-4-5 --tolerance 0.99 --out tokenlens-eval.json"
)


def argv(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[:3] == ["python3", "-m", "tokenlens"]
    return words[3:]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No key (the article's step 1 needs none), no Hugging Face download, a scratch cwd."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_articles_lines_mean_todays_options() -> None:
    parser = build_parser()
    one = config_from_args(parser.parse_args(argv(LINE_ONE_CLASS)))
    assert (one.classes, one.rates) == (("numeric-reasoning",), (0.6,))
    full_args = parser.parse_args(argv(LINE_FULL))
    assert full_args.out == Path("tokenlens-eval.json")
    full = config_from_args(full_args)
    assert (full.rates, full.repeats, full.tolerance) == ((0.8, 0.6, 0.4), 3, 0.99)
    assert (full.model, full.judge, full.judge_model) == (
        "claude-haiku-4-5",
        "llm",  # --judge-model names an LLM judge
        "claude-haiku-4-5",
    )
    # Today's spellings mean the same.
    today = parser.parse_args(["calibrate", "--classes", "numeric-reasoning", "--rates", "0.6"])
    assert config_from_args(today) == one


def test_the_free_line_runs_as_printed(offline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Offline, the dry run sizes the run that would happen: the offline default scope
    (the lookup set's one class; the banner says so and how to widen it), or every class of
    the starter set when asked."""
    assert main(argv(LINE_DRY)) == 0
    captured = capsys.readouterr()
    assert "agent-lookup" in captured.out and "extraction" not in captured.out
    assert "ext:tools-lossless" in captured.out and "cleartext" in captured.out
    assert "Offline default scope" in captured.err and "--tasks tasks_data/agent" in captured.err
    assert main([*argv(LINE_DRY), "--classes", "all"]) == 0
    out = capsys.readouterr().out
    for task_class in ("extraction", "numeric-reasoning", "summarization"):
        assert task_class in out


def test_the_one_class_line_dry(offline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv(LINE_ONE_CLASS), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "numeric-reasoning" in out and "extraction" not in out
    assert "r=0.6" in out and "r=0.8" not in out


def test_options_without_an_honest_meaning_fail_clearly(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv(LINE_FULL), "--dry-run"]) != 0
    assert "--out tokenlens-eval.json: a --dry-run publishes no policy" in capsys.readouterr().err
    assert main(["eval", "--judge", "metric", "--judge-model", "x", "--dry-run"]) != 0
    assert "--judge-model names an LLM judge" in capsys.readouterr().err
    assert not (offline / "tokenlens-eval.json").exists()


def test_the_full_line_writes_the_policy_to_out(
    prefect_api: str,
    anthropic: FakeAnthropic,
    offline: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The `anthropic` fixture's dummy key, removed by `offline`, comes back: a paid line.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    narrow: list[str] = ["--classes", "extraction", "--max-tasks-per-class", "1"]
    narrow += ["--methods", "safe,prune", "--store", "store", "--reports", "reports"]
    code = main([*argv(LINE_FULL), *narrow])
    assert code in (0, 4), capsys.readouterr().err  # 4: a class unresolved (one task)
    out = capsys.readouterr().out
    assert "copied to tokenlens-eval.json" in out
    copy = offline / "tokenlens-eval.json"
    published = offline / "reports" / "policy" / "latest.json"
    assert copy.read_bytes() == published.read_bytes()
    policy: Any = load_policy(copy)
    assert (policy.model, policy.tolerance) == ("claude-haiku-4-5", 0.99)
    assert policy.judge == "claude-haiku-4-5"  # the LLM judge, by its model
    judge_calls = [call for call in anthropic.calls() if call.is_judge]
    assert judge_calls, "the LLM judge was never called"

"""`tokenlens classify`: fit, then evaluate honestly (cross-validated on its own tasks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenlens.classifier.bundle import load_bundle
from tokenlens.cli import main
from tokenlens.tasks import CalibrationTask


def _write(path: Path, tasks: list[CalibrationTask]) -> Path:
    path.write_text("".join(t.model_dump_json(exclude_defaults=True) + "\n" for t in tasks))
    return path


@pytest.fixture
def split(tmp_path: Path, sample_tasks: list[CalibrationTask]) -> tuple[Path, Path, Path]:
    """(fit file: 3 tasks per class, held-out file: the rest, mixed file: both)."""
    per_class: dict[str, int] = {}
    fit, rest = [], []
    for task in sample_tasks:
        seen = per_class.get(task.task_class, 0)
        (fit if seen < 3 else rest).append(task)
        per_class[task.task_class] = seen + 1
    return (
        _write(tmp_path / "fit.jsonl", fit),
        _write(tmp_path / "rest.jsonl", rest),
        _write(tmp_path / "mixed.jsonl", fit[:4] + rest),
    )


def test_fit_then_evaluate_held_out_and_in_sample(
    tmp_path: Path, split: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fit_file, rest_file, mixed_file = split
    out = tmp_path / "bundle.json"
    assert main(["classify", "--fit", str(fit_file), "--out", str(out)]) == 0
    assert "threshold chosen on 5-fold by task" in capsys.readouterr().out
    bundle = load_bundle(out)
    assert bundle.fit.n_tasks == 21

    assert main(["classify", "--eval", str(rest_file), "--model", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tasks it was not fitted on" in text
    for word in ("confusion", "unsure", "right", "wrong", "p50", "p99", "extraction"):
        assert word in text

    assert main(["classify", "--eval", str(fit_file), "--model", str(out)]) == 0
    assert "cross-validated (5-fold by task family)" in capsys.readouterr().out

    assert main(["classify", "--eval", str(mixed_file), "--model", str(out)]) == 0
    assert "4 of " in capsys.readouterr().out  # the 4 training tasks are left out

    assert main(["classify", "--eval", str(fit_file), "--folds", "30"]) == 0
    assert "leave-one-out" in capsys.readouterr().out

    assert main(["classify", "--eval", str(fit_file), "--rules"]) == 0
    assert "hand-written rules" in capsys.readouterr().out


def test_bad_arguments_are_named(split: tuple[Path, Path, Path]) -> None:
    fit_file = str(split[0])
    with pytest.raises(SystemExit, match="--fit needs --out"):
        main(["classify", "--fit", fit_file])
    with pytest.raises(SystemExit, match="--folds 1"):
        main(["classify", "--eval", fit_file, "--folds", "1"])
    with pytest.raises(SystemExit, match="--max-wrong 2"):
        main(["classify", "--eval", fit_file, "--max-wrong", "2"])


def test_help_states_the_real_default(capsys: pytest.CaptureFixture[str]) -> None:
    from tokenlens.classifier.fit import DEFAULT_MAX_WRONG

    with pytest.raises(SystemExit):
        main(["classify", "--help"])
    assert f"(default {DEFAULT_MAX_WRONG:g}," in " ".join(capsys.readouterr().out.split())

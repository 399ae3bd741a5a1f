"""`tokenlens bench FILE`: one measured table per rung."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenlens.cli import main
from tokenlens.commands.bench import bench_rows

GUIDE = Path(__file__).parent / "data" / "guide.md"


def test_bench_prints_a_table_per_rung(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["bench", str(GUIDE), "--rates", "0.8,0.5", "--methods", "safe,minify,dedup,prune,select"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "cl100k_base" in out
    for name in ("safe", "minify", "dedup", "prune", "select", "--rate", "cleartext"):
        assert name in out
    assert out.count("\n0.8 ") == 2 and out.count("\n0.5 ") == 2


def test_bench_rows_are_measured_and_monotone() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    rows = bench_rows(text, ("prune", "select"), (0.8, 0.6, 0.4))
    for method in ("prune", "select"):
        reductions = [r.reduction for r in rows if r.method == method]
        assert reductions == sorted(reductions)  # type: ignore[type-var]
        assert all(r is not None and 0 < r < 1 for r in reductions)


def test_bench_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(tmp_path / "missing.md")]) == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", str(GUIDE), "--rates", "1.5"])

"""On a real markdown document (fences, tables, prose), prune and select save on the prose only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tokenlens.compress import Arm, compress_text
from tokenlens.compress.blocks import segment

_spec = importlib.util.spec_from_file_location(
    "ladder_helpers", Path(__file__).with_name("helpers.py")
)
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

FIXTURE = Path(__file__).parent / "data" / "guide.md"
README = Path(__file__).resolve().parents[2] / "README.md"


def _documents() -> list[Path]:
    """A fixture document and this repo's README (which holds fences, tables and prose)."""
    return [FIXTURE, README]


def prose_savings(text: str, arm: Arm) -> tuple[float, str]:
    """Fraction of the eligible (prose) tokens the arm removed, and its output."""
    result = compress_text(text, arm)
    return (result.original_tokens - result.compressed_tokens) / result.eligible_tokens, result.text


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: p.name)
@pytest.mark.parametrize("method", ["prune", "select"])
def test_half_rate_saves_over_20_percent_of_prose_and_keeps_structure(
    method: str, doc: Path
) -> None:
    text = doc.read_text(encoding="utf-8")
    kinds = {b.kind for b in segment(text)}
    assert {"fence", "table"} <= kinds
    savings, out = prose_savings(text, Arm(method, 0.5))
    assert savings > 0.20, f"{method}@0.5 saved only {savings:.1%} of the prose of {doc.name}"
    helpers.assert_protected_blocks_intact(text, out)
    for block in segment(text):
        if block.kind in {"fence", "table"}:
            assert block.text.rstrip("\n") in out

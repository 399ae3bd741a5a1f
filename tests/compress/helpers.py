"""Assertions the ladder tests share (loaded by path: tests are not a package)."""

from __future__ import annotations

from tokenlens.compress.blocks import segment


def protected_blocks(text: str) -> list[str]:
    """Texts of the blocks no lossy rung may alter (without their final line ending)."""
    return [b.text.rstrip("\r\n") for b in segment(text) if not b.is_blank and not b.eligible]


def assert_protected_blocks_intact(original: str, compressed: str) -> None:
    """Every non-eligible block of `original` appears verbatim in `compressed`, in order."""
    position = 0
    for block in protected_blocks(original):
        found = compressed.find(block, position)
        assert found >= 0, f"protected block altered or lost:\n{block}"
        position = found + len(block)

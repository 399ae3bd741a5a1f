"""The ladder on one piece of text: `compress_text(text, arm)`.

An arm runs exactly its own rung, nothing else: ``prune@0.6`` is prune at 0.6 on the
text as given, not prune on top of minify. So what the calibration grades for an arm is
that rung alone, and a lossy rung's output keeps every fence, table and JSON block of
its input byte for byte (minify, a gentler rung, would have compacted tables).
`control` returns the text unchanged.

Counts are offline estimates (`tokenlens.tokens.TOKENIZER_NOTE`), taken only when read:
the proxy compresses on the request path and counting tokens costs more than the
cheaper rungs themselves. `eligible_blocks` is how many of the text's blocks the arm's
own rung may rewrite (its gate, per block), `total_blocks` how many non-blank blocks the
text has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from tokenlens.compress import lingua
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.compress.blocks import Block, counted, segment
from tokenlens.compress.dedup import DEDUP_KINDS, apply_dedup
from tokenlens.compress.minify import apply_minify
from tokenlens.compress.prune import apply_prune
from tokenlens.compress.rewrite import ending_of, rebuild, split_lines
from tokenlens.compress.safe import VERBATIM_KINDS, apply_safe
from tokenlens.compress.select import apply_select
from tokenlens.compress.settings import CompressSettings
from tokenlens.errors import CompressionError
from tokenlens.tokens import estimate_tokens

#: The model-free, meaning-keeping rungs (0-2), by name.
GENTLE: tuple[tuple[str, Callable[[str, list[Block] | None], str]], ...] = (
    ("safe", apply_safe),
    ("minify", apply_minify),
    ("dedup", apply_dedup),
)
LOSSY_METHODS = frozenset({"prune", "select", "llmlingua2"})


@dataclass(frozen=True)
class TextResult:
    """One text through one arm, with measured (estimated-token) sizes, counted on demand."""

    text: str
    eligible_blocks: int
    total_blocks: int
    original: str
    eligible_texts: tuple[str, ...]

    @cached_property
    def original_tokens(self) -> int:
        return estimate_tokens(self.original)

    @cached_property
    def compressed_tokens(self) -> int:
        return estimate_tokens(self.text)

    @cached_property
    def eligible_tokens(self) -> int:
        return sum(estimate_tokens(text) for text in self.eligible_texts)

    @property
    def reduction(self) -> float:
        """Measured fraction of tokens removed (0 when nothing was there)."""
        if self.original_tokens <= 0:
            return 0.0
        return max(0.0, (self.original_tokens - self.compressed_tokens) / self.original_tokens)


def gate(method: str) -> Callable[[Block], bool]:
    """Which blocks `method`'s own rung may rewrite."""
    if method == "safe":
        return lambda b: not b.is_blank and b.kind not in VERBATIM_KINDS
    if method == "minify":
        return lambda b: (
            b.kind in {"json", "table", "html"} or (b.kind == "fence" and b.lang == "json")
        )
    if method == "dedup":
        return lambda b: b.kind in DEDUP_KINDS
    if method in LOSSY_METHODS:
        return lambda b: b.eligible
    return lambda b: False


def compress_text(
    text: str,
    arm: Arm,
    *,
    question: str | None = None,
    settings: CompressSettings | None = None,
    lossy: bool = True,
) -> TextResult:
    """Run `arm` on `text`. With ``lossy=False`` a lossy arm (rungs 3-5) leaves it unchanged.

    Raises:
        ArmUnavailable: llmlingua2 cannot load its model.
        CompressionError: a rung failed on this text.
    """
    all_blocks = segment(text)
    blocks = counted(all_blocks)
    runs = arm.method != CONTROL and (lossy or arm.method not in LOSSY_METHODS)
    allowed = gate(arm.method if runs else CONTROL)
    eligible = tuple(b.text for b in blocks if allowed(b))
    out = _run(text, all_blocks, arm, question, settings or CompressSettings()) if runs else text
    return TextResult(
        text=out,
        eligible_blocks=len(eligible),
        total_blocks=len(blocks),
        original=text,
        eligible_texts=eligible,
    )


def _run(
    text: str, blocks: list[Block], arm: Arm, question: str | None, settings: CompressSettings
) -> str:
    """The arm's rung on `text`, whose segmentation `blocks` the rung reuses."""
    gentle = dict(GENTLE)
    if arm.method in gentle:
        return gentle[arm.method](text, blocks)
    rate = arm.rate
    if rate is None:  # Arm guarantees a rate for rated methods
        raise CompressionError(f"{arm.key}: rated method without a rate")
    try:
        if arm.method == "prune":
            return apply_prune(text, rate, question, blocks=blocks)
        if arm.method == "select":
            return apply_select(text, rate, question, blocks=blocks)
    except (ValueError, KeyError, IndexError) as exc:
        raise CompressionError(f"{arm.key} failed: {type(exc).__name__}: {exc}") from exc
    return _run_lingua(text, blocks, rate, settings)


def _run_lingua(text: str, blocks: list[Block], rate: float, settings: CompressSettings) -> str:
    """LLMLingua-2 on the eligible blocks only; prose paragraphs and list items are units."""
    units: list[str] = []
    where: list[tuple[int, int | None]] = []  # (block, line or None for a whole paragraph)
    for b, block in enumerate(blocks):
        if not block.eligible:
            continue
        if block.kind == "prose":
            flat = " ".join(line.strip() for line in block.text.splitlines() if line.strip())
            units.append(flat)
            where.append((b, None))
        else:
            for n, line in enumerate(split_lines(block.text)):
                if line.content.strip():
                    units.append(line.content)
                    where.append((b, n))
    if not units:
        return text
    outputs = lingua.compress_units(units, rate, settings.llmlingua_model, settings.device)
    replaced: dict[int, str] = {}
    line_edits: dict[int, dict[int, str]] = {}
    for (b, line_no), new in zip(where, outputs, strict=True):
        if line_no is None:
            replaced[b] = new + ending_of(blocks[b].text) if new else ""
        else:
            line_edits.setdefault(b, {})[line_no] = new
    for b, edits in line_edits.items():
        rows = []
        for n, line in enumerate(split_lines(blocks[b].text)):
            if n not in edits:
                rows.append(line.prefix + line.content + line.ending)
            elif edits[n]:
                rows.append(line.prefix + edits[n] + line.ending)
        replaced[b] = "".join(rows)
    return rebuild(blocks, replaced)

"""`tokenlens bench FILE`: the measured reduction curve of each rung on one file.

Every figure is measured on the file (estimated tokens, see `tokenlens.tokens`), never
derived from the nominal keep rate: the seed once printed a 40 % saving next to a keep
rate of 0.7, which cannot both be true.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from tokenlens.config import DEFAULT_LLMLINGUA_MODEL, DEFAULT_METHODS
from tokenlens.errors import TokenLensError

DEFAULT_BENCH_RATES: tuple[float, ...] = (0.8, 0.7, 0.6, 0.5, 0.4)


@dataclass(frozen=True)
class BenchRow:
    method: str
    rate: float | None
    tokens: int | None
    reduction: float | None
    eligible_blocks: int | None
    total_blocks: int | None
    unavailable: str | None = None


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _rates(text: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(part) for part in _csv(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"rates must be numbers like 0.8,0.6: {exc}") from exc
    for rate in rates:
        if not 0.0 < rate < 1.0:
            raise argparse.ArgumentTypeError(f"rate {rate} is not a keep fraction in (0, 1)")
    return rates


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "bench",
        help="measure each compression rung's reduction curve on one file",
        description="Runs every rung on FILE and prints measured tokens and reduction; "
        "rated rungs at each keep rate. Token counts are cl100k_base estimates.",
    )
    parser.add_argument("file", type=Path, help="a text or markdown file")
    parser.add_argument(
        "--rates", type=_rates, default=DEFAULT_BENCH_RATES, help="keep fractions, e.g. 0.8,0.6"
    )
    parser.add_argument(
        "--methods", type=_csv, default=DEFAULT_METHODS, help="comma-separated rungs"
    )
    parser.add_argument("--question", default=None, help="question for question-aware rungs")
    parser.add_argument("--llmlingua-model", default=DEFAULT_LLMLINGUA_MODEL)
    parser.set_defaults(func=run)


def bench_rows(
    text: str,
    methods: tuple[str, ...],
    rates: tuple[float, ...],
    *,
    question: str | None = None,
    llmlingua_model: str = DEFAULT_LLMLINGUA_MODEL,
) -> list[BenchRow]:
    """Measured rows for each method (each rate for rated ones), in ladder order."""
    from tokenlens.compress import Arm, CompressSettings, build_ladder, compress_text
    from tokenlens.errors import ArmUnavailable

    unknown = [m for m in methods if m not in DEFAULT_METHODS]
    if unknown:
        raise TokenLensError(
            f"unknown method(s) {', '.join(unknown)} (known: {', '.join(DEFAULT_METHODS)})"
        )
    settings = CompressSettings(llmlingua_model=llmlingua_model)
    rows: list[BenchRow] = []
    arm: Arm
    for arm in build_ladder(methods, rates):
        try:
            result = compress_text(text, arm, question=question, settings=settings)
        except ArmUnavailable as exc:
            rows.append(BenchRow(arm.method, arm.rate, None, None, None, None, str(exc)))
            continue
        rows.append(
            BenchRow(
                arm.method,
                arm.rate,
                result.compressed_tokens,
                result.reduction,
                result.eligible_blocks,
                result.total_blocks,
            )
        )
    return rows


def format_bench(path: str, original_tokens: int, rows: list[BenchRow]) -> str:
    """One table per rated rung (rate, tokens, reduction); un-rated rungs one row each."""
    from tokenlens.tokens import TOKENIZER_NOTE

    out = [f"{path}: {original_tokens:,} tokens ({TOKENIZER_NOTE})", ""]
    single = [r for r in rows if r.rate is None]
    if single:
        out.append(f"{'method':<12} {'tokens':>8} {'reduction':>9} {'blocks':>8}")
        for row in single:
            out.append(_row(row.method, row))
        out.append("")
    for method in dict.fromkeys(r.method for r in rows if r.rate is not None):
        mine = [r for r in rows if r.method == method]
        out.append(f"{method}")
        if all(r.unavailable for r in mine):
            out.append(f"  unavailable: {mine[0].unavailable}")
            out.append("")
            continue
        out.append(f"{'--rate':<12} {'tokens':>8} {'reduction':>9} {'blocks':>8}")
        out.append(f"{'cleartext':<12} {original_tokens:>8,} {'—':>9}")
        for row in mine:
            out.append(_row(f"{row.rate:g}", row))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _row(name: str, row: BenchRow) -> str:
    if row.unavailable:
        return f"{name:<12} unavailable: {row.unavailable}"
    blocks = f"{row.eligible_blocks}/{row.total_blocks}"
    return f"{name:<12} {row.tokens or 0:>8,} {(row.reduction or 0) * 100:>8.1f}% {blocks:>8}"


def run(args: argparse.Namespace) -> int:
    from tokenlens.tokens import estimate_tokens

    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenLensError(f"{path}: cannot read file ({exc})") from exc
    rows = bench_rows(
        text,
        tuple(args.methods),
        tuple(args.rates),
        question=args.question,
        llmlingua_model=args.llmlingua_model,
    )
    print(format_bench(str(path), estimate_tokens(text), rows), end="")
    return 0

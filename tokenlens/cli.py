"""The `tokenlens` command line.

Each subcommand lives in its own module under `tokenlens.commands` and registers itself;
those modules import their heavy dependencies (prefect, torch, llama_cpp) only when run,
so `tokenlens --help` and `tokenlens serve` start fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from tokenlens.errors import TokenLensError

#: Subcommand modules, in the order `--help` lists them.
COMMANDS: tuple[str, ...] = ("tasks", "calibrate", "bench", "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenlens",
        description="Calibrate prompt compression against answer quality, then apply it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"tokenlens.commands.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except TokenLensError as exc:
        print(f"tokenlens: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tokenlens: interrupted", file=sys.stderr)
        return 130

"""The `tokenlens` command line.

Each subcommand lives in its own module under `tokenlens.commands` and registers itself;
those modules import their heavy dependencies (prefect, torch, llama_cpp) only when run,
so `tokenlens --help` and `tokenlens serve` start fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tokenlens.errors import TokenLensError

#: Subcommand modules, in the order `--help` lists them.
COMMANDS: tuple[str, ...] = (
    "tasks",
    "calibrate",
    "plan",
    "history",
    "bench",
    "fidelity",
    "tool-policy",
    "serve",
    "review",
    "classify",
    "fake-upstream",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenlens",
        description="Calibrate prompt compression against answer quality, then apply it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"tokenlens.commands.{name.replace('-', '_')}")
        module.register(sub)
    return parser


def configure_logging(*, verbose: bool) -> None:
    """Our own messages at INFO; other libraries only when something is wrong.

    Hugging Face's hub client is held to ERROR: when LLMLingua-2 weights cannot be fetched
    it logs every retry, and TokenLens reports the arm as unavailable with the reason anyway.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for name in ("tokenlens", "flows"):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("uvicorn").setLevel(logging.INFO)  # "running on http://…" for `serve`
    # huggingface_hub sets its own level (and handler) from this variable when imported.
    os.environ.setdefault("HF_HUB_VERBOSITY", "error")
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(verbose=args.verbose)
    try:
        return int(args.func(args) or 0)
    except TokenLensError as exc:
        print(f"tokenlens: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tokenlens: interrupted", file=sys.stderr)
        return 130


def missing_dependency(exc: ModuleNotFoundError) -> str:
    """What to do when this interpreter lacks tokenlens's dependencies (e.g. the system
    `python3` run in a checkout, where `tokenlens` is importable but tiktoken is not)."""
    venv = Path(__file__).resolve().parent.parent / ".venv" / "bin"
    where = (
        f"the checkout's environment is set up: run `{venv}/tokenlens ...` "
        f"(or `{venv}/python -m tokenlens ...`, or `source {venv}/activate` first)"
        if (venv / "tokenlens").exists()
        else "from a checkout, run `make setup` once (it creates ./.venv), then "
        "`.venv/bin/tokenlens ...` or `source .venv/bin/activate` (README: Quick start, "
        "Installing elsewhere)"
    )
    return (
        f"tokenlens: error: this Python ({sys.executable}) does not have tokenlens's "
        f"dependencies installed (no module named {exc.name!r}); {where}"
    )


def run(argv: Sequence[str] | None = None) -> int:
    """`main`, turning a missing third-party package into that advice (exit 2)."""
    try:
        return main(argv)
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.split(".")[0] == "tokenlens":
            raise
        print(missing_dependency(exc), file=sys.stderr)
        return 2

"""`tokenlens serve` (placeholder registration until its issue lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("serve", help="not built yet")
    parser.set_defaults(func=_not_built)


def _not_built(args: argparse.Namespace) -> int:
    print("tokenlens serve: not built yet", flush=True)
    return 2

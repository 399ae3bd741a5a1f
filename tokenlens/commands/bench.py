"""`tokenlens bench` (placeholder registration until its issue lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("bench", help="not built yet")
    parser.set_defaults(func=_not_built)


def _not_built(args: argparse.Namespace) -> int:
    print("tokenlens bench: not built yet", flush=True)
    return 2

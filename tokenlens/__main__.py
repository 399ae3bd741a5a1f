"""`python -m tokenlens`: the CLI, with a clear word when this Python lacks its packages."""

from tokenlens.cli import run

raise SystemExit(run())

"""`tokenlens calibrate`: run the calibration flow in-process, or `--dry-run` it for free."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tokenlens.config import DEFAULT_METHODS, DEFAULT_RATES, CalibrationConfig
from tokenlens.tasks import DEFAULT_TASKS_PATH


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _rates(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in _csv(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"rates must be numbers like 0.8,0.6: {exc}") from exc


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="measure what each compression arm costs in answer quality; publish a policy",
        description="Runs the Prefect flow `calibrate` in-process (ephemeral Prefect). "
        "Offline (no ANTHROPIC_API_KEY) it answers with the embedded local model and "
        "grades with the reference-metric judge.",
    )
    parser.add_argument("--dry-run", action="store_true", help="no model calls: sizes and cost")
    parser.add_argument("--tasks", type=Path, default=DEFAULT_TASKS_PATH, help="JSONL task file")
    parser.add_argument("--classes", type=_csv, default=None, help="comma-separated classes")
    parser.add_argument("--max-tasks-per-class", type=int, default=None)
    parser.add_argument(
        "--shortest-first",
        action="store_true",
        help="with --max-tasks-per-class: keep each class's shortest tasks",
    )
    parser.add_argument(
        "--methods", type=_csv, default=DEFAULT_METHODS, help="comma-separated ladder methods"
    )
    parser.add_argument(
        "--rates", type=_rates, default=DEFAULT_RATES, help="keep fractions, e.g. 0.8,0.6,0.4"
    )
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--backend", choices=("auto", "anthropic", "local"), default="auto")
    parser.add_argument("--model", default=None, help="answer model (or a GGUF path for local)")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--temperature", type=float, default=None, help="answer sampling")
    parser.add_argument("--judge", choices=("metric", "llm", "both"), default=None)
    parser.add_argument("--judge-model", default=None)
    parser.add_argument("--judge-both-orders", action="store_true")
    parser.add_argument("--judge-twice", action="store_true", help="split the noise floor")
    parser.add_argument("--tolerance", type=float, default=None)
    parser.add_argument("--mode", choices=("interval", "mean"), default=None)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--max-spend", type=float, default=None, help="USD; stop scheduling")
    parser.add_argument("--batch", action="store_true", help="Message Batches API (half price)")
    parser.add_argument(
        "--design",
        choices=("fixed", "sequential"),
        default=None,
        help="fixed: every cell up front (default); sequential: rounds that pay only until "
        "each arm's verdict is settled",
    )
    parser.add_argument("--store", type=Path, default=None, help="Parquet store root")
    parser.add_argument("--reports", type=Path, default=None, help="policy and report root")
    parser.add_argument("--llmlingua-model", default=None)
    parser.add_argument("--seed", type=int, default=None, help="sample seed (default 0)")
    parser.add_argument(
        "--fresh-sample",
        action="store_true",
        help="draw new answer seeds for this run (new calls) instead of reusing the ledger's",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        metavar="RUN",
        help="resume an interrupted run with its own seeds and settings "
        "(default: the newest unfinished run in --store); pays only for missing calls",
    )
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> CalibrationConfig:
    """Only the options the user gave override the config's defaults."""
    fields: dict[str, Any] = {
        "tasks": args.tasks,
        "classes": args.classes,
        "max_tasks_per_class": args.max_tasks_per_class,
        "shortest_tasks_first": args.shortest_first,
        "methods": args.methods,
        "rates": args.rates,
        "backend": args.backend,
        "model": args.model,
        "judge_both_orders": args.judge_both_orders,
        "judge_twice": args.judge_twice,
        "batch": args.batch,
        "design": args.design or "fixed",
    }
    optional = {
        "repeats": args.repeats,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "judge": args.judge,
        "judge_model": args.judge_model,
        "tolerance": args.tolerance,
        "mode": args.mode,
        "concurrency": args.concurrency,
        "max_spend": args.max_spend,
        "store": args.store,
        "reports": args.reports,
        "llmlingua_model": args.llmlingua_model,
        "seed": args.seed,
    }
    fields.update({key: value for key, value in optional.items() if value is not None})
    return CalibrationConfig(**fields)


#: Prefect settings for an in-process run, unless the user set them: a fresh ephemeral
#: database can take longer than Prefect's 20 s start-up default on a small machine, and
#: a calibration tool has no business phoning home.
PREFECT_DEFAULTS: dict[str, str] = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if args.dry_run:
        from tokenlens.dryrun import run_dry_run

        return run_dry_run(config)
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    from flows.calibrate import run_calibration

    return run_calibration(config, fresh_sample=args.fresh_sample, resume=args.resume)

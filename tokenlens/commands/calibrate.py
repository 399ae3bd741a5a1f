"""`tokenlens calibrate`: run the calibration flow in-process, or `--dry-run` it for free."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tokenlens.config import DEFAULT_METHODS, DEFAULT_RATES, CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.tasks import DEFAULT_TASKS_PATH


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _rates(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in _csv(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"rates must be numbers like 0.8,0.6: {exc}") from exc


#: `--max-policy-age none`: no age limit.
NO_LIMIT = "none"


def _days(text: str) -> float | str:
    if text.strip().lower() == NO_LIMIT:
        return NO_LIMIT
    try:
        return float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"a number of days or `none`, got {text!r}") from exc


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "calibrate",
        # `eval`: the article's spelling (docs/article.md).
        aliases=["eval"],
        help="measure what each compression arm costs in answer quality; publish a policy",
        description="Runs the Prefect flow `calibrate` in-process (ephemeral Prefect). "
        "Offline (no ANTHROPIC_API_KEY) it answers with the embedded local model and "
        "grades with the reference-metric judge. `tokenlens eval` is the same command.",
    )
    parser.add_argument("--dry-run", action="store_true", help="no model calls: sizes and cost")
    parser.add_argument(
        "--tasks", type=Path, default=DEFAULT_TASKS_PATH, help="JSONL task file, or a folder"
    )
    parser.add_argument(
        "--classes",
        "--class",
        type=_csv,
        default=None,
        help="comma-separated classes, or 'all' (offline the default is one class)",
    )
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
    parser.add_argument(
        "--judge-model", default=None, help="LLM judge model (without --judge: --judge llm)"
    )
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
    parser.add_argument(
        "--store",
        default=None,
        help="root of the run tables and the call ledger: a folder (default reports/store) "
        "or a URL such as s3://bucket/prefix/store",
    )
    parser.add_argument(
        "--reports", default=None, help="policy and report root: a folder (default reports) or URL"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the published policy to FILE (for `serve --policy FILE`)",
    )
    parser.add_argument(
        "--max-policy-age",
        type=_days,
        default=None,
        metavar="DAYS",
        help="days a certified policy entry stays in force without a run re-certifying it; "
        "a run that cannot measure a class carries its last entry over until then "
        "(default 7; `none`: no limit)",
    )
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


def explicit_options(args: argparse.Namespace) -> set[str]:
    """Config fields the user chose on the command line (`--classes all` included)."""
    return {"classes"} if args.classes == ("all",) else set()


def config_from_args(args: argparse.Namespace) -> CalibrationConfig:
    """Only the options the user gave override the config's defaults.

    `--judge-model` alone asks for an LLM judge (`--judge llm`): naming a judge model and
    then grading with the model-free metric would ignore it silently."""
    judge = args.judge
    if args.judge_model is not None:
        if judge is None:
            judge = "llm"
        elif judge == "metric":
            raise TokenLensError(
                "--judge-model names an LLM judge, but --judge metric uses none: "
                "drop --judge-model or pass --judge llm (or both)"
            )
    fields: dict[str, Any] = {
        "tasks": args.tasks,
        "classes": None if args.classes == ("all",) else args.classes,
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
        "judge": judge,
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
    if args.max_policy_age is not None:
        fields["max_policy_age"] = None if args.max_policy_age == NO_LIMIT else args.max_policy_age
    try:
        return CalibrationConfig(**fields)
    except ValidationError as exc:
        raise TokenLensError(
            "; ".join(_option_problem(error) for error in exc.errors(include_url=False))
        ) from exc


#: Config fields whose option is not `--field-name`.
_OPTION_NAMES = {"shortest_tasks_first": "--shortest-first", "classes": "--classes"}


def _option_problem(error: Any) -> str:
    """`--repeats: Input should be greater than or equal to 1 (got 0)`, one per problem."""
    field = str(error["loc"][0]) if error["loc"] else ""
    option = _OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
    message = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    got = "" if isinstance(value, dict) else f" (got {_shown(value)})"
    return f"{option}: {message}{got}"


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return str(value)


def check_before_flow(config: CalibrationConfig, *, resume: str | None) -> None:
    """Bad input fails here, in about a second, before Prefect starts (7-13 s of flow
    start-up and a traceback otherwise): the ladder's methods and rates, the task file
    and its classes, or the run to resume. Raises TokenLensError (exit 2)."""
    if resume is not None:
        from tokenlens.calibration.runs import find_run

        find_run(config.store, None if resume == "latest" else resume)
        return
    from tokenlens.compress.arms import build_ladder

    try:
        build_ladder(config.methods, config.rates)
    except ValueError as exc:
        raise TokenLensError(f"--methods/--rates: {exc}") from exc
    config.selected_tasks()


#: Prefect settings for an in-process run, unless the user set them: a fresh ephemeral
#: database can take longer than Prefect's 20 s start-up default on a small machine, and
#: a calibration tool has no business phoning home.
PREFECT_DEFAULTS: dict[str, str] = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}


def run(args: argparse.Namespace) -> int:
    from tokenlens.config import offline_scope

    config = config_from_args(args)
    check_before_flow(config, resume=None if args.dry_run else args.resume)
    if args.resume is None:
        # The same scope for the dry run and the run, so the plan counts what the run pays.
        scope = offline_scope(config, explicit=explicit_options(args))
        config = scope.config
        if scope.banner():
            print(scope.banner(), file=sys.stderr)
    if args.dry_run:
        if args.out is not None:
            raise TokenLensError(
                f"--out {args.out}: a --dry-run publishes no policy to write; drop one of them"
            )
        from tokenlens.dryrun import run_dry_run

        return run_dry_run(config)
    if args.out is not None and not args.out.parent.is_dir():
        raise TokenLensError(f"--out {args.out}: folder {args.out.parent} does not exist")
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    return run_calibration(config, fresh_sample=args.fresh_sample, resume=args.resume, out=args.out)


def run_calibration(
    config: CalibrationConfig,
    *,
    fresh_sample: bool = False,
    resume: str | None = None,
    out: Path | None = None,
) -> int:
    """`tokenlens calibrate`: run the flow in-process, print the policy; return the exit code.

    The exit code is the CLI's loud failure (4: a class unresolved), so the in-process flow
    run itself is not failed for it."""
    from tokenlens.calibration.prefect_server import PrefectApi

    # The temporary Prefect server (when no API is configured) boots in its own process
    # while this one loads Prefect, pandas and the flow (only now: `--help` and
    # `--dry-run` stay fast).
    with PrefectApi() as api:
        from flows.calibrate import calibrate, flow_parameters
        from tokenlens.calibration.prefect_server import mark_orphans_crashed
        from tokenlens.errors import SpendLimitReached
        from tokenlens.policy import atomic_write_text, load_policy
        from tokenlens.report import outcome_lines
        from tokenlens.storage import location

        for noisy in ("httpx", "httpcore"):  # one line per Prefect API request otherwise
            logging.getLogger(noisy).setLevel(logging.WARNING)
        params = flow_parameters(
            config, fresh_sample=fresh_sample, resume=resume, fail_on_unresolved=False
        )
        try:
            with api.connected():
                for flow_run_id in mark_orphans_crashed(str(config.store)):
                    print(
                        f"flow run {flow_run_id} marked Crashed: its process is gone",
                        file=sys.stderr,
                    )
                result = calibrate(**params)
        except SpendLimitReached as exc:
            print(f"tokenlens: {exc}", file=sys.stderr)
            return exc.exit_code
    print()
    for line in result.policy_lines:
        print(line)
    print()
    for arm, reason in result.unavailable_arms.items():
        print(f"not measured here: {arm} ({reason})")
    print(f"run:     {result.run_id} (calibration {result.calibration_id})")
    print(f"policy:  {result.policy_path}")
    if out is not None:
        atomic_write_text(out, location(result.policy_path).read_text())
        print(f"         copied to {out}")
    print(f"report:  {result.report_path}")
    print(f"tables:  {result.store}")
    print(f"ledger:  {result.ledger} ({result.new_calls} new calls this run)")
    print(f"spend:   {result.spend_line} (planned: {result.estimate})")
    policy = load_policy(location(result.policy_path))
    for line in outcome_lines(policy, result.exit_code):
        print(line)
    return result.exit_code

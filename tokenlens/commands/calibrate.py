"""`tokenlens calibrate`: run the calibration flow in-process, or `--dry-run` it for free."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tokenlens.calibration.params import CalibrateParams
from tokenlens.commands.model_options import add_model_options, given
from tokenlens.config import CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.formatting import plural

#: Run options with no command-line meaning: the CLI reports an unresolved class by its
#: exit code (4) instead of failing the in-process flow run.
NOT_OPTIONS = ("fail_on_unresolved",)
#: Spellings other than `--field-name` (the first is shown; `--class`: the article's).
FLAGS = {
    "classes": ["--classes", "--class"],
    "shortest_tasks_first": ["--shortest-first", "--shortest-tasks-first"],
}
#: `--max-policy-age none`: no age limit; `--classes all`: every class (offline too).
NO_LIMIT = "none"
ALL_CLASSES = ("all",)


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
        # `eval`: the article's spelling (README, "For readers of the article").
        aliases=["eval"],
        help="measure what each compression arm costs in answer quality; publish a policy",
        description="Runs the Prefect flow `calibrate` in-process (ephemeral Prefect). "
        "Offline (no ANTHROPIC_API_KEY) it answers with the embedded local model and "
        "grades with the reference-metric judge. `tokenlens eval` is the same command. "
        "Every option is a parameter of the flow (and of the `calibrate/nightly` "
        "deployment), with the same meaning and default.",
    )
    parser.add_argument("--dry-run", action="store_true", help="no model calls: sizes and cost")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the published policy to FILE (for `serve --policy FILE`)",
    )
    add_model_options(
        parser,
        CalibrateParams,
        skip=NOT_OPTIONS,
        flags=FLAGS,
        extra={
            "judge_model": {"help": "LLM judge model (without --judge: --judge llm)"},
            "max_policy_age": {"type": _days, "metavar": "DAYS"},
            "resume": {
                "nargs": "?",
                "const": "latest",
                "metavar": "RUN",
                "help": "resume an interrupted run with its own seeds and settings "
                "(default: the newest unfinished run in --store); pays only for missing "
                "calls",
            },
            "shards": {
                "metavar": "N",
                "help": "split the paid work into N shards run by the workers of the "
                "shard deployment's pool (needs PREFECT_API_URL: the server those "
                "workers use; docs/many-machines.md)",
            },
        },
    )
    parser.set_defaults(func=run)


def params_from_args(args: argparse.Namespace) -> CalibrateParams:
    """Only the options the user gave override the defaults (`CalibrateParams`).

    `--judge-model` alone asks for an LLM judge (`--judge llm`): naming a judge model and
    then grading with the model-free metric would ignore it silently."""
    fields = given(args, CalibrateParams)
    if fields.get("classes") == ALL_CLASSES:
        fields["classes"] = None
    if fields.get("max_policy_age") == NO_LIMIT:
        fields["max_policy_age"] = None
    if args.judge_model is not None:
        if args.judge is None:
            fields["judge"] = "llm"
        elif args.judge == "metric":
            raise TokenLensError(
                "--judge-model names an LLM judge, but --judge metric uses none: "
                "drop --judge-model or pass --judge llm (or both)"
            )
    try:
        return CalibrateParams(**fields)
    except ValidationError as exc:
        raise TokenLensError(
            "; ".join(_option_problem(error) for error in exc.errors(include_url=False))
        ) from None


def explicit_options(args: argparse.Namespace) -> set[str]:
    """Settings the user chose on the command line that read as defaults (`--classes all`),
    and the design when `--shards` is given (shards split the fixed design's plan)."""
    chosen = {"classes"} if args.classes == ALL_CLASSES else set()
    if args.shards is not None:
        chosen.add("design")
    return chosen


def config_from_args(args: argparse.Namespace) -> CalibrationConfig:
    """The calibration settings of the command line (the run options left out)."""
    return params_from_args(args).config()


def _option_problem(error: Any) -> str:
    """`--repeats: Input should be greater than or equal to 1 (got 0)`, one per problem."""
    field = str(error["loc"][0]) if error["loc"] else ""
    option = FLAGS.get(field, ["--" + field.replace("_", "-")])[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    if not field:
        return message
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

    params = params_from_args(args)
    config = params.config()
    check_before_flow(config, resume=None if args.dry_run else params.resume)
    if params.resume is None:
        # The same scope for the dry run and the run, so the plan counts what the run pays.
        scope = offline_scope(config, explicit=explicit_options(args))
        config = scope.config
        if scope.banner():
            print(scope.banner(), file=sys.stderr)
        options = params.model_dump(exclude=set(CalibrationConfig.model_fields))
        params = CalibrateParams.of(config, **options)
    if args.dry_run:
        if args.out is not None:
            raise TokenLensError(
                f"--out {args.out}: a --dry-run publishes no policy to write; drop one of them"
            )
        from tokenlens.dryrun import run_dry_run

        return run_dry_run(config)
    if args.out is not None and not args.out.parent.is_dir():
        raise TokenLensError(f"--out {args.out}: folder {args.out.parent} does not exist")
    if params.shards is not None and not _configured_api():
        raise TokenLensError(
            f"--shards {params.shards}: shards are flow runs of the deployment "
            f"{params.shard_deployment} taken by its pool's workers; point PREFECT_API_URL "
            "at the Prefect server those workers use (a temporary server has no workers)"
        )
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    return run_calibration(params, out=args.out)


def _configured_api() -> bool:
    """Whether a Prefect API is configured (environment, or else the Prefect profile)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def run_calibration(params: CalibrateParams, *, out: Path | None = None) -> int:
    """`tokenlens calibrate`: run the flow in-process, print the policy; return the exit code.

    The exit code is the CLI's loud failure (4: a class unresolved), so the in-process flow
    run itself is not failed for it."""
    from tokenlens.calibration.prefect_server import PrefectApi

    # The temporary Prefect server (when no API is configured) boots in its own process
    # while this one loads Prefect, pandas and the flow (only now: `--help` and
    # `--dry-run` stay fast).
    with PrefectApi() as api:
        from prefect.exceptions import CancelledRun

        from flows.calibrate import calibrate
        from tokenlens.calibration.prefect_server import mark_orphans_crashed
        from tokenlens.errors import SpendLimitReached
        from tokenlens.policy import atomic_write_text, load_policy
        from tokenlens.report import outcome_lines
        from tokenlens.storage import location

        for noisy in ("httpx", "httpcore"):  # one line per Prefect API request otherwise
            logging.getLogger(noisy).setLevel(logging.WARNING)
        config = params.config()
        options = params.model_dump(exclude=set(CalibrationConfig.model_fields))
        flow_kwargs = CalibrateParams.of(config, **{**options, "fail_on_unresolved": False})
        try:
            with api.connected():
                for flow_run_id in mark_orphans_crashed(str(config.store)):
                    print(
                        f"flow run {flow_run_id} marked Crashed: its process is gone",
                        file=sys.stderr,
                    )
                result = calibrate(**flow_kwargs.flow_kwargs())
        except SpendLimitReached as exc:
            print(f"tokenlens: {exc}", file=sys.stderr)
            return exc.exit_code
        except CancelledRun as exc:  # e.g. `prefect flow-run cancel` on a sharded run
            print(f"tokenlens: cancelled: {exc}", file=sys.stderr)
            return 130
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
    if result.attempts > 1 or result.shards:
        print(
            f"         run total: {result.run_calls} paid calls, ${result.run_spent_usd:.4f} "
            f"over {result.attempts} attempt(s)" + (" and its shards" if result.shards else "")
        )
    if result.in_flight_calls:
        print(
            f"         in flight at a kill: {plural(result.in_flight_calls, 'call')} sent with "
            "no answer stored (the upstream may have billed them)"
        )
    if config.resolved_backend() == "local":  # does the verdict rest on right answers?
        from tokenlens.calibration.store import Store
        from tokenlens.competence import cleartext_lines

        for line in cleartext_lines(Store(config.store, result.run_id).read("grades")):
            print(f"model:   {line}")
    policy = load_policy(location(result.policy_path))
    for line in outcome_lines(policy, result.exit_code):
        print(line)
    return result.exit_code

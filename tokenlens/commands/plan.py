"""`tokenlens plan [RUN]`: tasks, repeats, calls and dollars needed to certify each arm."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenlens.config import DEFAULT_ANTHROPIC_MODEL, DEFAULT_REPORTS
from tokenlens.errors import TokenLensError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "plan",
        help="tasks and repeats per class needed to certify each arm, with calls and cost",
    )
    parser.add_argument(
        "run",
        nargs="?",
        default=None,
        help="run id or calibration id (default: the run behind <reports>/policy/latest.json); "
        "with no calibration at all, plan from stated assumptions",
    )
    parser.add_argument("--reports", default=DEFAULT_REPORTS, help="policy root (folder or URL)")
    parser.add_argument(
        "--store", default=None, help="store root, folder or URL (default <reports>/store)"
    )
    parser.add_argument(
        "--model", default=None, help="price answers on this model (default: the run's)"
    )
    parser.add_argument(
        "--judge-model",
        default=None,
        help="price an LLM judge on this model; `metric` for the free reference metric "
        "(default: the judge the run used)",
    )
    parser.add_argument("--tolerance", type=float, default=None)
    parser.add_argument(
        "--tasks",
        type=Path,
        default=None,
        metavar="PATH",
        help="instead of a calibration: price a nightly run of this task file or folder "
        "(use 'starter' for the bundled set), with and without Batches",
    )
    parser.add_argument("--repeats", type=int, default=3, help="with --tasks: repeats per cell")
    parser.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    if args.tasks is not None:
        from tokenlens.commands.plan_tasks import print_nightly

        if args.repeats < 1:
            raise TokenLensError(f"--repeats {args.repeats}: need at least 1")
        path = None if str(args.tasks) == "starter" else args.tasks
        print_nightly(
            path,
            model=args.model or DEFAULT_ANTHROPIC_MODEL,
            judge_model=args.judge_model,
            repeats=args.repeats,
        )
        return 0
    from tokenlens.commands.plan_view import load_inputs, print_plans
    from tokenlens.storage import join

    inputs = load_inputs(
        run=args.run,
        reports=args.reports,
        store=args.store or join(args.reports, "store"),
        tolerance=args.tolerance,
    )
    model = args.model or (
        inputs.model if inputs.model and inputs.model != "local" else DEFAULT_ANTHROPIC_MODEL
    )
    if inputs.tolerance is None:
        raise TokenLensError("no tolerance: pass --tolerance")
    chosen = args.judge_model is not None
    judge_model = args.judge_model if chosen else inputs.judge_model
    if judge_model == "metric":
        judge_model = None
    print_plans(inputs, model=model, judge_model=judge_model, chosen=chosen)
    return 0

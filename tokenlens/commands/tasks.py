"""`tokenlens tasks validate|harvest|import`: check, harvest or import a task file."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from tokenlens.tasks import (
    AGENT_CLASSES,
    DEFAULT_TASKS_PATH,
    KNOWN_CLASSES,
    LOOKUP_CLASSES,
    load_tasks,
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("tasks", help="inspect calibration task files")
    tasks_sub = parser.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    validate = tasks_sub.add_parser(
        "validate", help="check a JSONL task file; print per-class counts and token sizes"
    )
    validate.add_argument("path", nargs="?", type=Path, default=None, help="JSONL task file")
    validate.add_argument(
        "--tasks",
        type=Path,
        default=None,
        metavar="PATH",
        help="the task file, as `calibrate --tasks` takes it (default: the bundled set)",
    )
    validate.set_defaults(func=run_validate)

    harvest = tasks_sub.add_parser(
        "harvest",
        help="turn proxy captures (tokenlens serve --capture) into a task file",
        description="Captured requests become tasks: question = last user text block, "
        "context = the rest the ladder may compress, reference = the production model's "
        "answer to the uncompressed request (tagged reference:model-answer).",
    )
    harvest.add_argument(
        "captures", help="capture folder or fsspec URL (e.g. s3://bucket/captures), or one part"
    )
    harvest.add_argument("--out", type=Path, required=True, help="task file to write (JSONL)")
    harvest.add_argument("--per-class", type=int, default=None, help="at most N tasks per class")
    harvest.add_argument(
        "--min-context", type=int, default=0, help="drop tasks whose context has fewer tokens"
    )
    harvest.add_argument("--seed", type=int, default=0, help="seed of the per-class draw")
    harvest.set_defaults(func=run_harvest)

    imp = tasks_sub.add_parser(
        "import",
        help="turn a JSONL/CSV/Parquet file you already have into a task file",
        description="Columns named like task fields are taken as they are; --map names the "
        "others. Strict: every bad row is reported with its line/row and field.",
    )
    imp.add_argument("file", type=Path, help="JSONL, CSV or Parquet file")
    imp.add_argument(
        "--map",
        default=None,
        help="FIELD=COLUMN,... e.g. question=prompt,context=document,reference=answer",
    )
    imp.add_argument("--task-class", default=None, help="class of rows that have none")
    imp.add_argument("--format", choices=("jsonl", "csv", "parquet"), default=None)
    imp.add_argument("--out", type=Path, required=True, help="task file to write (JSONL)")
    imp.set_defaults(func=run_import)


def run_validate(args: argparse.Namespace) -> int:
    from tokenlens.errors import TaskFileError
    from tokenlens.tokens import TOKENIZER_NOTE, estimate_tokens

    if args.path is not None and args.tasks is not None and args.path != args.tasks:
        raise TaskFileError(f"two task files given ({args.path} and --tasks {args.tasks})")
    args.path = args.path or args.tasks or DEFAULT_TASKS_PATH
    tasks = load_tasks(args.path)
    sizes: dict[str, list[int]] = defaultdict(list)
    fragile: dict[str, int] = defaultdict(int)
    for task in tasks:
        sizes[task.task_class].append(estimate_tokens(task.context))
        fragile[task.task_class] += any(tag.startswith("fragile:") for tag in task.tags)
    print(f"{args.path}: {len(tasks)} tasks, {len(sizes)} classes — OK")
    print(f"context tokens: {TOKENIZER_NOTE}; fragile: tagged fragile:*")
    header = (
        f"{'class':<24}{'tasks':>6}{'min':>8}{'median':>8}{'max':>8}{'total':>10}"
        f"{'>=10k':>7}{'fragile':>9}"
    )
    print(header)
    print("-" * len(header))
    # an agent (or lookup) set is checked against its own classes, any other the starter's
    family = next(
        (f for f in (AGENT_CLASSES, LOOKUP_CLASSES) if set(sizes) <= set(f)), KNOWN_CLASSES
    )
    ordered = [c for c in family if c in sizes] + sorted(set(sizes) - set(family))
    for name in ordered:
        values = sorted(sizes[name])
        median = values[len(values) // 2]
        long = sum(v >= 10_000 for v in values)
        share = f"{100 * fragile[name] / len(values):.0f}%"
        print(
            f"{name:<24}{len(values):>6}{values[0]:>8}{median:>8}{values[-1]:>8}"
            f"{sum(values):>10}{long:>7}{share:>9}"
        )
    absent = [c for c in family if c not in sizes]
    if absent:
        print(f"note: no tasks for {', '.join(absent)}")
    return 0


def run_harvest(args: argparse.Namespace) -> int:
    from tokenlens.errors import TaskFileError
    from tokenlens.harvest import DROP_REASONS, harvest
    from tokenlens.tasks import write_tasks

    if args.per_class is not None and args.per_class < 1:
        raise TaskFileError("--per-class must be >= 1")
    tasks, report = harvest(
        args.captures, per_class=args.per_class, min_context=args.min_context, seed=args.seed
    )
    print(f"{args.captures}: {report.requests} captured requests, {report.replays} replay answers")
    for reason, count in sorted(report.dropped.items()):
        if count:
            print(f"dropped {count:>5}  {reason}: {DROP_REASONS[reason]}")
    if not tasks:
        raise TaskFileError(f"{args.captures}: no task survived; nothing written")
    write_tasks(tasks, args.out)
    load_tasks(args.out)  # what we write must pass the strict loader
    kept = ", ".join(f"{name} {count}" for name, count in sorted(report.kept.items()))
    print(f"wrote {len(tasks)} tasks to {args.out} ({kept})")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from tokenlens.importer import import_tasks, parse_mapping
    from tokenlens.tasks import write_tasks

    tasks = import_tasks(
        args.file, parse_mapping(args.map), task_class=args.task_class, fmt=args.format
    )
    write_tasks(tasks, args.out)
    load_tasks(args.out)
    print(f"wrote {len(tasks)} tasks to {args.out}")
    return 0

"""`tokenlens tasks validate PATH`: check a task file before paying for a run on it."""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from tokenlens.tasks import DEFAULT_TASKS_PATH, KNOWN_CLASSES, load_tasks


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("tasks", help="inspect calibration task files")
    tasks_sub = parser.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    validate = tasks_sub.add_parser(
        "validate", help="check a JSONL task file; print per-class counts and token sizes"
    )
    validate.add_argument("path", nargs="?", type=Path, default=DEFAULT_TASKS_PATH)
    validate.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    from tokenlens.tokens import TOKENIZER_NOTE, estimate_tokens

    tasks = load_tasks(args.path)
    sizes: dict[str, list[int]] = defaultdict(list)
    for task in tasks:
        sizes[task.task_class].append(estimate_tokens(task.context))
    print(f"{args.path}: {len(tasks)} tasks, {len(sizes)} classes — OK")
    print(f"context tokens: {TOKENIZER_NOTE}")
    header = f"{'class':<24}{'tasks':>6}{'min':>8}{'median':>8}{'max':>8}{'total':>9}"
    print(header)
    print("-" * len(header))
    ordered = [c for c in KNOWN_CLASSES if c in sizes] + sorted(set(sizes) - set(KNOWN_CLASSES))
    for name in ordered:
        values = sorted(sizes[name])
        median = values[len(values) // 2]
        print(f"{name:<24}{len(values):>6}{values[0]:>8}{median:>8}{values[-1]:>8}{sum(values):>9}")
    absent = [c for c in KNOWN_CLASSES if c not in sizes]
    if absent:
        print(f"note: no tasks for {', '.join(absent)}")
    return 0

"""`tokenlens fidelity BODY_OR_TASKS --arm ...`: does an arm tell the truth on your requests?

Reads Messages API bodies (a JSON file holding one body or a list of them, or a JSONL
file of bodies) or a task file/folder (agent tasks carry a body and facts), runs each arm
on each body and prints, per arm, the tool-output and whole-body reduction, fabricated
lines, unmarked drops, facts lost and CPU per request, with the first problems found.
``--against`` checks a body somebody else already compressed. Exit 1 when an arm is
refused (a fabricated line or an unmarked drop), so a CI step can gate on it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tokenlens.errors import TaskFileError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "fidelity",
        help="check what compression does to tool output (no model needed)",
        description="Run each --arm on each request and check every compressed tool_result "
        "against its original: fabricated lines, unmarked drops, facts lost. "
        "Exit 1 if any arm is refused.",
    )
    parser.add_argument("path", type=Path, help="body .json / bodies .jsonl, or a task file/folder")
    parser.add_argument(
        "--arm",
        action="append",
        default=None,
        help="arm to check, e.g. safe, prune@0.5, ext:headroom (repeatable; default: safe)",
    )
    parser.add_argument(
        "--against", type=Path, default=None, help="an already compressed body to check instead"
    )
    parser.add_argument("--problems", type=int, default=5, help="problems to print per arm")
    parser.set_defaults(func=run)


def load_requests(path: Path) -> list[tuple[dict[str, Any], tuple[Any, ...]]]:
    """(body, facts) pairs from a body file, a bodies JSONL file or a task file/folder."""
    from tokenlens.tasks import load_tasks

    if not path.exists():
        raise TaskFileError(f"{path}: no such file or folder")
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        first = next((line for line in text.splitlines() if line.strip()), "")
        try:
            if path.suffix == ".json":
                data = json.loads(text)
                bodies = data if isinstance(data, list) else [data]
                return [(_body(b, path, n), ()) for n, b in enumerate(bodies, 1)]
            if "messages" in json.loads(first) and "task_class" not in json.loads(first):
                lines = [line for line in text.splitlines() if line.strip()]
                return [(_body(json.loads(b), path, n), ()) for n, b in enumerate(lines, 1)]
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{path}: not JSON: {exc}") from exc
    requests = []
    for task in load_tasks(path):
        requests.append((task.to_request(model="claude-sonnet-4-5"), tuple(task.facts)))
    return requests


def _body(value: Any, path: Path, n: int) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        raise TaskFileError(f"{path}: request {n} is not a Messages body (no 'messages' list)")
    return value


def run(args: argparse.Namespace) -> int:
    from tokenlens.compress import Arm
    from tokenlens.fidelity import check_body
    from tokenlens.fidelity_run import HEADER, ArmTotals, measure, refusal, table_row

    requests = load_requests(args.path)
    if args.against is not None:
        compressed = load_requests(args.against)
        if len(compressed) != len(requests):
            raise TaskFileError(
                f"{args.against}: {len(compressed)} requests, {args.path} has {len(requests)}"
            )
        row = ArmTotals(str(args.against))
        for (body, facts), (after, _) in zip(requests, compressed, strict=True):
            row.add(body, after, 0.0, check_body(body, after, facts))
        rows = [row]
    else:
        try:
            arms = [Arm.parse(text) for text in args.arm or ["safe"]]
        except ValueError as exc:
            raise TaskFileError(f"--arm: {exc}") from exc
        rows = measure(arms, requests)
    print(f"{args.path}: {len(requests)} requests")
    print(HEADER)
    for row in rows:
        print(table_row(row))
    for row in rows:
        if row.report.problems and args.problems > 0:
            print(f"\n{row.arm}: first problems")
            for problem in row.report.problems[: args.problems]:
                print(f"  - {problem}")
    return 1 if any(refusal(row.report) for row in rows if not row.unavailable) else 0

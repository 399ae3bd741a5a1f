"""`tokenlens tool-policy TASKS --policy FILE`: the policy's per-kind tool-output arms.

Walks the tool-output rungs gentlest first on the tool outputs of each kind (the kind the
proxy reads from each block and its tool_use, so a task with a listing and a file read
counts for both), graded by the fidelity check and the tasks' exact facts
(`tokenlens.decision.tool_output`), prints the walk, and writes the policy again with its
`tool_output` entries (the per-class entries unchanged) to `--out` (default: the policy's
folder, as `latest.json` and a dated copy).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenlens.errors import TokenLensError

if TYPE_CHECKING:
    from tokenlens.facts import Fact


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "tool-policy",
        help="decide the per-kind tool-output arms from agent tasks (no model needed)",
        description="Walk the tool-output rungs gentlest first on the agent tasks of each kind "
        "and add the rung that keeps every fact (0 fabricated lines, 0 unmarked drops) to "
        "the policy as its tool_output entry.",
    )
    parser.add_argument("tasks", type=Path, help="agent task file or folder (tasks_data/agent)")
    parser.add_argument("--policy", type=Path, required=True, help="policy file to extend")
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default: its)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the walk and the entries, write nothing"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tokenlens.decision.tool_output import by_block_kind, decide_tool_output
    from tokenlens.policy import load_policy, write_policy
    from tokenlens.tasks import load_tasks

    policy = load_policy(args.policy)
    requests: list[tuple[dict[str, Any], tuple[Fact, ...]]] = [
        (task.to_request(model=policy.model), tuple(task.facts))
        for task in load_tasks(args.tasks)
        if task.body is not None
    ]
    by_kind = by_block_kind(requests)
    if not by_kind:
        raise TokenLensError(f"{args.tasks}: no agent tasks (tasks with a body) found")
    entries, walks = decide_tool_output(by_kind)
    print(
        f"{'kind':<12}{'rung':<12}{'tasks':>6}{'saved':>8}{'fabric.':>9}{'unmarked':>9}"
        f"{'facts lost':>11}"
    )
    for kind, results in walks.items():
        for r in results:
            rep = r.report
            print(
                f"{kind:<12}{r.rung:<12}{r.tasks:>6}{r.reduction:>8.1%}{rep.fabricated_lines:>9}"
                f"{rep.unmarked_drops:>9}{rep.facts_lost:>11}"
            )
        print(f"{kind:<12}-> {entries[kind].mark} {entries[kind].reason}")
    # a kind left alone (no rung held) still counts, as output sent as it came
    before = sum(walks[kind][0].tokens_before for kind in entries if walks[kind])
    after = sum(
        next(r for r in walks[kind] if r.rung == _key(entry.method, entry.rate)).tokens_after
        if entry.method != "none"
        else walks[kind][0].tokens_before
        for kind, entry in entries.items()
        if walks[kind]
    )
    if before:
        print(f"all kinds at the chosen rungs: {1 - after / before:.1%} of tool-output tokens")
    if args.dry_run:
        return 0
    updated = policy.model_copy(update={"tool_output": entries})
    where = write_policy(updated, args.out or args.policy.parent)
    print(f"wrote {where}")
    return 0


def _key(method: str, rate: float | None) -> str:
    return method if rate is None else f"{method}@{rate:g}"

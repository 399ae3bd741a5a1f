"""Capture the agent task set: tasks_data/agent/<kind>[-N].jsonl.

    .venv/bin/python scripts/agentgen                  # every kind
    .venv/bin/python scripts/agentgen agent-vcs        # one kind

Runs real commands (grep, ls, find, cat -n, pip, jq, sed/tail, zcat, pytest, git log) over
material installed on a Debian 12 machine with the project's environment, and over two
cloned repositories (see kinds.REPOS). Each output becomes the tool_result of a coding
agent's Messages body; the question, its facts and the reference are computed from that
output by derive.py (never typed). Deterministic where the commands are: every choice is
seeded, but a different machine has other files, logs and timings.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from common import BODY_BINS, Candidate, body, spread, take_turns, tool_ids
from derive import Unanswerable, derive
from kinds import BODY_SETS, KINDS, LOOKUP_SETS

from tokenlens.facts import Fact
from tokenlens.tasks import CalibrationTask, write_tasks

OUT = Path(__file__).resolve().parents[2] / "tasks_data" / "agent"
#: Where a lookup set goes (kinds.LOOKUP_SETS), and how many tasks it keeps.
LOOKUP_OUT = OUT.parent / "lookup"
LOOKUP_COUNT = 24
#: Split a kind's file before it reaches the house limit of 5 MB.
SPLIT_BYTES = 4_000_000


def make_task(candidate: Candidate, number: int, prefix: str = "") -> CalibrationTask | None:
    """The first of the candidate's templates its output answers, as a task."""
    output = candidate.rounds[-1].output
    if not all(r.output.strip() for r in candidate.rounds):
        return None
    for template, arg in candidate.templates:
        try:
            question, facts, reference = derive(template, arg, output)
        except Unanswerable:
            continue
        ids = tool_ids(candidate.key, len(candidate.rounds))
        return CalibrationTask(
            id=f"{prefix or candidate.kind}-{number:03d}",
            task_class=candidate.kind,
            question=question,
            context="\n\n".join(r.output for r in candidate.rounds),
            reference=reference,
            body=body(candidate.request, candidate.rounds, question, ids),
            facts=tuple(Fact(kind=k, value=v, source=ids[-1]) for k, v in facts),  # type: ignore[arg-type]
            tags=(
                f"source:{candidate.source}",
                f"licence:{candidate.licence}",
                f"template:{template}",
                "arg:" + json.dumps(arg, ensure_ascii=False),
            ),
        )
    return None


def capture(kind: str) -> list[CalibrationTask]:
    """A kind's tasks, or a body set's (ids named after the set, fewer per size bin)."""
    candidates = {**KINDS, **BODY_SETS}[kind]()
    template: dict[str, str] = {}
    for c in candidates:
        task = make_task(c, 0)
        if task is not None:
            template[c.key] = next(t for t in task.tags if t.startswith("template:"))
    answerable = [c for c in candidates if c.key in template]
    if kind in BODY_SETS:  # overlapping outputs may answer one question twice: ask it once
        asked: dict[tuple[str, ...], Candidate] = {}
        for c in answerable:
            task = make_task(c, 0)
            assert task is not None
            asked.setdefault(task.tags[2:], c)
        answerable = list(asked.values())
    bins = BODY_BINS if kind in BODY_SETS else None
    chosen = spread(answerable, seed=kind, group=lambda c: template[c.key], bins=bins)
    tasks = [make_task(c, i + 1, kind) for i, c in enumerate(chosen)]
    return [t for t in tasks if t is not None]


def capture_lookup(kind: str) -> list[CalibrationTask]:
    """A lookup set: every answerable candidate, its questions (templates) taking turns in a
    seeded order, the first `LOOKUP_COUNT` kept, numbered in that order (so the first N
    tasks of the file mix the templates)."""
    rng = random.Random(kind)
    groups: dict[str, list[Candidate]] = {}
    for c in LOOKUP_SETS[kind]():
        task = make_task(c, 0)
        if task is not None:
            groups.setdefault(task.tags[2], []).append(c)
    turns = take_turns(groups, rng)
    tasks = [make_task(c, i + 1, kind) for i, c in enumerate(turns[:LOOKUP_COUNT])]
    return [t for t in tasks if t is not None]


def write(kind: str, tasks: list[CalibrationTask]) -> list[Path]:
    """A body set's file is named body-<kind>: it loads after its kind's own files, so the
    first N tasks of a class stay the same sample."""
    stem = "body-" + kind.removesuffix("-body") if kind in BODY_SETS else kind
    for old in [*OUT.glob(f"{stem}.jsonl"), *OUT.glob(f"{stem}-[0-9].jsonl")]:
        old.unlink()
    parts: list[list[CalibrationTask]] = [[]]
    size = 0
    for task in tasks:
        line = len(json.dumps(task.model_dump(mode="json"), ensure_ascii=False).encode())
        if parts[-1] and size + line > SPLIT_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(task)
        size += line
    paths = []
    for n, part in enumerate(parts, start=1):
        path = OUT / (f"{stem}.jsonl" if len(parts) == 1 else f"{stem}-{n}.jsonl")
        write_tasks(part, path)
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kinds", nargs="*", default=[*KINDS, *BODY_SETS, *LOOKUP_SETS])
    args = parser.parse_args()
    for kind in args.kinds:
        if kind in LOOKUP_SETS:
            tasks = capture_lookup(kind)
            LOOKUP_OUT.mkdir(exist_ok=True)
            write_tasks(tasks, LOOKUP_OUT / f"{kind}.jsonl")
            print(f"{kind}: {len(tasks)} tasks -> {LOOKUP_OUT / kind}.jsonl", file=sys.stderr)
            continue
        tasks = capture(kind)
        paths = write(kind, tasks)
        print(f"{kind}: {len(tasks)} tasks -> {', '.join(p.name for p in paths)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

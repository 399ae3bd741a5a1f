"""What every kind of agent task shares: running a real command, the Messages body a coding
agent sends around its output, and the choice of a spread of output sizes.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.tokens import estimate_tokens

EPHEMERAL = {"type": "ephemeral"}
#: Outputs outside this many (estimated) tokens are not used.
MIN_TOKENS, MAX_TOKENS = 200, 50_000
#: Size bins (tokens) and how many tasks each kind draws from each, smallest first.
BINS = ((200, 1_000, 18), (1_000, 5_000, 20), (5_000, 20_000, 16), (20_000, 50_000, 9))
#: The same bins for a body set (kinds.BODY_SETS): about twenty tasks.
BODY_BINS = ((200, 1_000, 5), (1_000, 5_000, 6), (5_000, 20_000, 5), (20_000, 50_000, 4))

SYSTEM_PROMPT = (
    "You are a coding agent working in a terminal on the user's machine. Use the tools to "
    "look things up instead of guessing: run shell commands, read files, search code. Tool "
    "results are the real output of the command or read. Answer from what the tools "
    "returned, exactly: quote file paths, line numbers, versions, counts, names and hashes "
    "as they appear. Keep answers short."
)

TOOLS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": "Run a shell command and return its standard output and error.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run."},
                "cwd": {"type": "string", "description": "Working directory."},
            },
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file; lines are returned numbered like `cat -n`.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "File to read."}},
            "required": ["path"],
        },
    },
    {
        "name": "grep",
        "description": "Search files for a regular expression; prints path:line:text.",
        "input_schema": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string"},
                "include": {"type": "string", "description": "Glob of files to search."},
            },
            "required": ["pattern", "path"],
        },
    },
]

ENV = {
    "LC_ALL": "C",
    "TZ": "UTC",
    "PATH": "/usr/bin:/bin",
    "HOME": "/nonexistent",
    "COLUMNS": "120",
}


def run(command: str, cwd: str | Path = "/", *, env: dict[str, str] | None = None) -> str:
    """The standard output (and error) of a shell command, as an agent's bash tool shows it."""
    done = subprocess.run(
        command,
        shell=True,
        cwd=cwd,
        capture_output=True,
        text=True,
        errors="replace",
        env={**ENV, **(env or {})},
        timeout=600,
    )
    return done.stdout + done.stderr


@dataclass
class Round:
    """One tool call and its real output."""

    tool: str
    input: dict[str, Any]
    output: str


@dataclass
class Candidate:
    """A captured output and what may be asked about it (see derive.py)."""

    kind: str
    key: str  # unique and stable: names the task id
    request: str  # the user's opening request
    rounds: list[Round]  # the last round's output is the one the question is about
    templates: Sequence[tuple[str, Any]]  # (template, argument) pairs derive.py can answer
    source: str  # where the material comes from
    licence: str
    extra_tags: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.rounds[-1].output)


def body(
    request: str, rounds: Sequence[Round], question: str, ids: Iterable[str]
) -> dict[str, Any]:
    """The Messages body a coding agent sends: cache breakpoints on the system prompt, the
    tools and the newest message, as Claude Code places them."""
    system = [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": EPHEMERAL}]
    tools = [dict(tool) for tool in TOOLS]
    tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    messages: list[dict[str, Any]] = [{"role": "user", "content": request}]
    ids = list(ids)
    for i, (one, tool_id) in enumerate(zip(rounds, ids, strict=True)):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": tool_id, "name": one.tool, "input": one.input}
                ],
            }
        )
        content: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": tool_id, "content": one.output}
        ]
        if i == len(rounds) - 1:
            content.append({"type": "text", "text": question, "cache_control": EPHEMERAL})
        messages.append({"role": "user", "content": content})
    return {"system": system, "tools": tools, "messages": messages}


def tool_ids(key: str, n: int) -> list[str]:
    """Stable tool_use ids for a task (toolu_ + 24 characters, as the API makes them)."""
    rng = random.Random(f"ids-{key}")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return ["toolu_01" + "".join(rng.choice(alphabet) for _ in range(22)) for _ in range(n)]


def take_turns(groups: dict[str, list[Candidate]], rng: random.Random) -> list[Candidate]:
    """The groups' candidates, each group shuffled, one from each group in turn."""
    queues = [groups[name] for name in sorted(groups)]
    for queue in queues:
        rng.shuffle(queue)
    turns: list[Candidate] = []
    while any(queues):
        turns += [queue.pop() for queue in queues if queue]
    return turns


def spread(
    candidates: Sequence[Candidate],
    seed: str,
    group: Callable[[Candidate], str],
    bins: Sequence[tuple[int, int, int]] | None = None,
) -> list[Candidate]:
    """A seeded pick over the size bins (`BINS`), so every kind runs from ~200 to ~50k tokens;
    within a bin the groups (question templates) take turns, so no one question dominates.
    A bin short of candidates passes its shortfall to the next smaller one."""
    rng = random.Random(seed)
    chosen: list[Candidate] = []
    carry = 0
    for low, high, want in reversed(bins or BINS):
        groups: dict[str, list[Candidate]] = {}
        for c in candidates:
            if low <= c.tokens < high:
                groups.setdefault(group(c), []).append(c)
        turns = take_turns(groups, rng)
        take = min(len(turns), want + carry)
        carry = want + carry - take
        chosen.extend(turns[:take])
    return sorted(chosen, key=lambda c: c.key)


def unique(items: Iterable[Any], key: Callable[[Any], Any]) -> list[Any]:
    """Items whose key occurs exactly once."""
    items = list(items)
    counts: dict[Any, int] = {}
    for item in items:
        counts[key(item)] = counts.get(key(item), 0) + 1
    return [item for item in items if counts[key(item)] == 1]


def env_python() -> str:
    """The interpreter to run pip and pytest with (the one running this script)."""
    import sys

    return os.environ.get("AGENTGEN_PYTHON", sys.executable)

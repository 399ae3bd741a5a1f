"""The kind of one tool output, from the block and the tool_use that produced it alone.

Why only those two: the proxy compresses a tool_result behind a prompt-cache breakpoint
only because its compression can never change on a later turn. The arm a block gets is
picked by its kind, so the kind must be a pure function of what cannot change either:
the block's own text and the call that produced it, never the request's class, the
question, or anything later in the conversation.

Kinds follow the agent task set's classes (``agent-<kind>``): ``search``, ``listing``,
``file-read``, ``json``, ``log`` (logs and test runs, and a log file read with ``tail``,
``sed -n`` or ``zcat … | head``), ``vcs``; anything else is ``other``.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from tokenlens.compress.toolout.lines import GREP_HIT

KINDS: tuple[str, ...] = ("search", "listing", "file-read", "json", "log", "vcs", "other")

_SEARCH = frozenset({"grep", "rg", "ag", "ack", "egrep", "fgrep", "git-grep"})
_LISTING = frozenset({"ls", "find", "tree", "du", "fd", "glob", "stat"})
_READ = frozenset({"cat", "head", "tail", "sed", "nl", "less", "bat", "read", "view"})
_LOG = frozenset(
    {"pytest", "tox", "nox", "make", "journalctl", "dmesg", "npm", "cargo", "go", "mvn"}
)
_JSON = frozenset({"curl", "jq", "gh", "http", "kubectl", "aws", "gcloud"})
_STAGES = re.compile(r"\|\||&&|[|;]")
#: A file that holds a log: reading it (``tail``, ``sed -n``, ``zcat … | head``) is a log.
_LOG_FILE = re.compile(r"(?:\.log\b|/var/log/|changelog|\bjournal\b)", re.IGNORECASE)
_LOG_WORDS = re.compile(r"\b(ERROR|WARN(ING)?|INFO|DEBUG|FAILED|PASSED|Traceback)\b")


def command_of(tool_use: dict[str, Any] | None) -> str:
    """The shell command a tool_use ran ('' when it ran none)."""
    if not tool_use:
        return ""
    data = tool_use.get("input")
    if isinstance(data, dict):
        for key in ("command", "cmd", "script"):
            value = data.get(key)
            if isinstance(value, str):
                return value
    return ""


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=False)
    except ValueError:
        return command.split()


def _by_call(tool_use: dict[str, Any] | None) -> str | None:
    if not tool_use:
        return None
    name = str(tool_use.get("name", "")).lower()
    if name in ("grep", "search", "search_files", "ripgrep"):
        return "search"
    if name in ("glob", "ls", "list_files", "list_directory"):
        return "listing"
    if name in ("read", "read_file", "view", "open_file"):
        data = tool_use.get("input")
        path = " ".join(str(v) for v in data.values()) if isinstance(data, dict) else ""
        return "log" if _LOG_FILE.search(path) else "file-read"
    command = command_of(tool_use)
    if not command:
        return None
    for segment in _STAGES.split(command):  # the first stage a kind is known for decides
        kind = _by_words(_words(segment.strip()))
        if kind is not None:
            return "log" if kind == "file-read" and _LOG_FILE.search(command) else kind
    if "--format" in command and "json" in command:
        return "json"
    return None


def _by_words(words: list[str]) -> str | None:
    first = words[0].rsplit("/", 1)[-1] if words else ""
    if first == "git" and len(words) > 1:
        sub = words[1]
        if sub in ("log", "show", "blame", "diff", "shortlog", "reflog"):
            return "vcs"
        if sub == "grep":
            return "search"
        if sub in ("ls-files", "ls-tree", "status"):
            return "listing"
    if first in ("python", "python3") and "pytest" in words:
        return "log"
    for kind, names in (
        ("search", _SEARCH),
        ("listing", _LISTING),
        ("file-read", _READ),
        ("log", _LOG),
        ("json", _JSON),
    ):
        if first in names:
            return kind
    return None


def _by_text(text: str) -> str:
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            json.loads(stripped)
        except ValueError:
            pass
        else:
            return "json"
    lines = stripped.splitlines()[:50]
    if lines and sum(1 for line in lines if GREP_HIT.match(line)) * 2 > len(lines):
        return "search"
    if lines and sum(1 for line in lines if _LOG_WORDS.search(line)) * 4 > len(lines):
        return "log"
    return "other"


def tool_output_kind(text: str, tool_use: dict[str, Any] | None) -> str:
    """The kind of a tool output (see `KINDS`): the call decides, else the text.

    JSON text is ``json`` whatever produced it (its rungs work on items, not lines).
    """
    stripped = text.lstrip()
    if stripped[:1] in "[{" and _by_text(text) == "json":
        return "json"
    return _by_call(tool_use) or _by_text(text)

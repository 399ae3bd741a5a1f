"""The calibration set: one typed task per JSONL line, in one file or a folder of files.

The loader is strict on purpose. A calibration on a half-loaded or silently repaired file
would certify a policy for data nobody looked at, so every problem is reported with the
file, the line number and the field, and a bad file never half-loads.

A folder is read as its `*.jsonl` files in name order, as if concatenated (ids unique
across them): the bundled set is split so that no committed file passes the house limit
of 5 MB, and a single file keeps working everywhere a task file is accepted.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tokenlens.errors import TaskFileError, json_problem
from tokenlens.facts import Fact

#: The classes of the bundled starter set. Users may bring any class name of their own.
KNOWN_CLASSES: tuple[str, ...] = (
    "extraction",
    "code-context",
    "numeric-reasoning",
    "instruction-following",
    "long-doc-qa",
    "summarization",
    "chat-history",
)

#: The classes of the bundled agent set (real tool output; see docs/agent-traffic.md).
AGENT_CLASSES: tuple[str, ...] = (
    "agent-search",
    "agent-listing",
    "agent-file-read",
    "agent-json",
    "agent-log",
    "agent-vcs",
)

#: The bundled starter set (not a benchmark: see docs/calibration-set.md): a folder of JSONL files.
DEFAULT_TASKS_PATH = Path(__file__).resolve().parent.parent / "tasks_data" / "starter"
#: The bundled agent set: Messages bodies with real tool output and exact answer facts.
AGENT_TASKS_PATH = DEFAULT_TASKS_PATH.parent / "agent"
#: The lookup set: one value read from a short tool output (a JSON document, a short file,
#: `pip show`), made like the agent set; what an offline run measures by default.
LOOKUP_TASKS_PATH = DEFAULT_TASKS_PATH.parent / "lookup"
LOOKUP_CLASSES: tuple[str, ...] = ("agent-lookup",)


class Turn(BaseModel):
    """One earlier turn of a conversation, for chat-history tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


def _text_of(content: Any) -> list[str]:
    """The texts of a message content (a string, or blocks; a tool_result's own content)."""
    if isinstance(content, str):
        return [content]
    texts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_result":
            texts.extend(_text_of(block.get("content", "")))
    return texts


def body_tool_outputs(body: Mapping[str, Any]) -> list[str]:
    """The tool_result texts of a Messages body, in order."""
    out: list[str] = []
    for message in body.get("messages", ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                out.append("\n".join(_text_of(block.get("content", ""))))
    return out


def body_question(body: Mapping[str, Any]) -> str:
    """The final question of a Messages body: the text blocks of its last user message."""
    for message in reversed(body.get("messages", ())):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            blocks = content if isinstance(content, list) else []
            return "\n".join(
                b["text"]
                for b in blocks
                if isinstance(b, Mapping)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            )
    return ""


class SourceFile(BaseModel):
    """Where a context (or part of it) was cut from: a file of an installed package."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str = Field(min_length=1)
    version: str = Field(min_length=1)
    path: str = Field(min_length=1)
    licence: str = Field(min_length=1)


class CalibrationTask(BaseModel):
    """One calibration task. The first five fields are the seed's shape, unchanged.

    An agent task carries `body`, the Messages body as the agent sent it (system, tools,
    rounds of tool_use / tool_result, the final question) and the `facts` a correct answer
    states. Its `context` (the tool outputs, joined) and `question` (the last user text)
    are derived from the body when the file leaves them out, so sizes, selection and the
    classifier read an agent task like any other.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    task_class: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    question: str = Field(min_length=1)
    context: str = Field(min_length=1)
    reference: str = Field(min_length=1)
    system: str | None = None
    history: tuple[Turn, ...] = ()
    tags: tuple[str, ...] = ()
    facts: tuple[Fact, ...] = ()
    body: dict[str, Any] | None = None
    source: tuple[SourceFile, ...] = ()  # the files a real-text context was cut from

    @model_validator(mode="before")
    @classmethod
    def _derive_from_body(cls, raw: Any) -> Any:
        if not isinstance(raw, dict) or not isinstance(raw.get("body"), dict):
            return raw
        body = raw["body"]
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("body.messages must be a non-empty list of messages")
        filled = dict(raw)
        if "context" not in filled:
            filled["context"] = "\n\n".join(body_tool_outputs(body))
        if "question" not in filled:
            filled["question"] = body_question(body)
        return filled

    @field_validator("question", "context", "reference")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty or only whitespace")
        return value

    def unset_added_fields(self) -> set[str]:
        """The fields added after the seed's shape (facts, body, source) that this task
        leaves at their defaults: content hashes and calibration ids leave them out, so a
        task without them hashes as it always did."""
        return {name for name in ("facts", "body", "source") if not getattr(self, name)}

    def to_request(self, *, model: str, max_tokens: int = 512) -> dict[str, Any]:
        """The Messages API body a real application would send for this task.

        The last user turn holds the context and the question as two text blocks, so the
        compressor can tell the question (never compressed) from the context around it.
        An agent task's body is returned as the agent sent it (a deep copy), with `model`
        and `max_tokens` set.
        """
        if self.body is not None:
            sent = copy.deepcopy(self.body)
            sent["model"] = model
            sent["max_tokens"] = max_tokens
            return sent
        messages: list[dict[str, Any]] = [
            {"role": turn.role, "content": turn.content} for turn in self.history
        ]
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": self.context},
                    {"type": "text", "text": self.question},
                ],
            }
        )
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
        if self.system:
            body["system"] = self.system
        return body


def _format_validation_error(path: Path, lineno: int, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "(line)"
        if err["type"] == "missing":
            msg = "is required but missing"
        elif err["type"] == "extra_forbidden":
            msg = "is not a known field (allowed: " + ", ".join(CalibrationTask.model_fields) + ")"
        else:
            msg = err["msg"]
        problems.append(f"{path}:{lineno}: field '{field}' {msg}")
    return "\n".join(problems)


def parse_tasks(
    lines: Iterable[str], path: Path, *, seen: dict[str, str] | None = None
) -> list[CalibrationTask]:
    """Parse JSONL text into tasks, collecting every error before raising.

    `seen` maps ids already read (from earlier files of a folder) to where they were read,
    so a duplicate across files is reported like one within a file.
    """
    tasks: list[CalibrationTask] = []
    errors: list[str] = []
    first_seen = seen if seen is not None else {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{path}:{lineno}: malformed JSON ({json_problem(exc)})")
            continue
        if not isinstance(raw, dict):
            errors.append(f"{path}:{lineno}: expected a JSON object, got {type(raw).__name__}")
            continue
        try:
            task = CalibrationTask.model_validate(raw)
        except ValidationError as exc:
            errors.append(_format_validation_error(path, lineno, exc))
            continue
        if task.id in first_seen:
            errors.append(
                f"{path}:{lineno}: field 'id' duplicates id {task.id!r} "
                f"first seen on {first_seen[task.id]}"
            )
            continue
        first_seen[task.id] = f"line {lineno}" if seen is None else f"{path}:{lineno}"
        tasks.append(task)
    if errors:
        raise TaskFileError("\n".join(errors))
    if not tasks and seen is None:
        raise TaskFileError(f"{path}: no tasks in file")
    return tasks


def task_files(path: str | Path | None = None) -> list[Path]:
    """The files a task path stands for: the file itself, or a folder's `*.jsonl` in name
    order (default: the bundled starter set).

    Raises:
        TaskFileError: the path does not exist, or the folder holds no `*.jsonl` file.
    """
    where = Path(path) if path is not None else DEFAULT_TASKS_PATH
    if where.is_dir():
        files = sorted(p for p in where.glob("*.jsonl") if p.is_file())
        if not files:
            raise TaskFileError(f"{where}: folder holds no *.jsonl task file")
        return files
    if not where.is_file():
        raise TaskFileError(f"{where}: task file does not exist")
    return [where]


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"{file}: cannot read task file ({exc})") from exc


def load_tasks(
    path: str | Path | None = None, *, classes: Iterable[str] | None = None
) -> list[CalibrationTask]:
    """Load a JSONL task file or folder (default: the bundled starter set), optionally one
    class subset.

    Raises:
        TaskFileError: the path is missing or any line of any file is bad; nothing is
            returned then, and the message lists every problem with its file and line.
    """
    files = task_files(path)
    where = files[0] if len(files) == 1 else Path(path if path is not None else DEFAULT_TASKS_PATH)
    if len(files) == 1:
        tasks = parse_tasks(_read(files[0]).splitlines(), files[0])
    else:
        tasks = []
        errors: list[str] = []
        seen: dict[str, str] = {}
        for file in files:
            try:
                tasks.extend(parse_tasks(_read(file).splitlines(), file, seen=seen))
            except TaskFileError as exc:
                errors.append(str(exc))
        if errors:
            raise TaskFileError("\n".join(errors))
        if not tasks:
            raise TaskFileError(f"{where}: no tasks in any file")
    if classes is None:
        return tasks
    wanted = list(dict.fromkeys(classes))
    present = {task.task_class for task in tasks}
    missing = [name for name in wanted if name not in present]
    if missing:
        have = ", ".join(sorted(present))
        raise TaskFileError(f"{where}: no tasks of class {', '.join(missing)} (file has: {have})")
    return [task for task in tasks if task.task_class in wanted]


def select_tasks(
    tasks: Iterable[CalibrationTask],
    *,
    max_per_class: int | None = None,
    shortest_first: bool = False,
) -> list[CalibrationTask]:
    """Cap the tasks per class, keeping file order in the result.

    `shortest_first` keeps each class's shortest contexts (by characters) instead of its
    first ones: the cheap subset, for runs on a slow local model.
    """
    pool = list(tasks)
    if max_per_class is None:
        return pool
    ranked = sorted(pool, key=lambda task: len(task.context)) if shortest_first else pool
    kept_ids: set[str] = set()
    per_class: dict[str, int] = {}
    for task in ranked:
        if per_class.get(task.task_class, 0) < max_per_class:
            kept_ids.add(task.id)
            per_class[task.task_class] = per_class.get(task.task_class, 0) + 1
    return [task for task in pool if task.id in kept_ids]


def _dump(task: CalibrationTask) -> dict[str, Any]:
    """A task as its file line: defaults omitted, and an agent task's context and question
    omitted where the body gives them back (the output is not stored twice)."""
    raw = task.model_dump(mode="json", exclude_defaults=True)
    if task.body is not None:
        if task.context == "\n\n".join(body_tool_outputs(task.body)):
            raw.pop("context", None)
        if task.question == body_question(task.body):
            raw.pop("question", None)
    return raw


def write_tasks(tasks: Iterable[CalibrationTask], path: Path) -> int:
    """Write tasks as the loader reads them (one JSON object per line; defaults omitted),
    atomically: a half-written task file would fail the strict loader. Returns the count."""
    lines = [json.dumps(_dump(task), ensure_ascii=False) for task in tasks]
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    partial.replace(path)
    return len(lines)

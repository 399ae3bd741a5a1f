"""`tokenlens tasks harvest`: captured proxy traffic -> calibration tasks of the loader's shape.

A policy is only as good as the tasks it was measured on; the user's own requests are the
ones that matter. Each captured request becomes one `CalibrationTask` cut the way the
ladder sees the request (`tokenlens.compress.request`):

* ``question``: the last text block of the last user message, or, when that message is
  one piece, its tail from the last prose paragraph (`split_question`): the text the
  ladder never compresses.
* ``context``: the rest of that message's text, which the ladder may compress.
* ``system`` and ``history`` (earlier turns, their text) are carried over.
* ``reference``: the production model's own answer to the uncompressed request (captured
  on pass-through, or from the shadow judge's replay), tagged ``reference:model-answer``:
  retention is then measured against what the model said to the full prompt, not
  against a hand-written truth.

Dropped, each with a count: requests without a reference answer, without a question,
with nothing compressible (the ladder's own target list is empty, e.g. a one-paragraph
message or everything under a cache breakpoint) or a context shorter than `min_context`
tokens, near-duplicates (`tokenlens.neardup`: within one class and question template,
the same system, history and context up to ids and small edits), and tasks over
`per_class` in a class.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tokenlens.captures import CapturedReplay, CapturedRequest, read_records
from tokenlens.compress.arms import Arm
from tokenlens.compress.request import compress_request
from tokenlens.compress.slots import split_question
from tokenlens.errors import CompressionError
from tokenlens.neardup import find_duplicates, normalize
from tokenlens.tasks import CalibrationTask, Turn
from tokenlens.tokens import estimate_tokens

MODEL_ANSWER_TAG = "reference:model-answer"
DROP_REASONS = {
    "no_reference": "no answer to the uncompressed request was captured",
    "no_question": "no user text to take a question from",
    "nothing_compressible": "nothing the ladder may compress",
    "short_context": "context shorter than --min-context",
    "not_a_task": "body does not make a valid task",
    "duplicate": "near-duplicate of a kept task (same template)",
    "over_per_class": "over --per-class",
}


@dataclass
class HarvestReport:
    """What happened to every captured request read."""

    requests: int = 0
    replays: int = 0
    kept: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class _Candidate:
    time: float
    task: CalibrationTask


def harvest(
    store: str | Path,
    *,
    per_class: int | None = None,
    min_context: int = 0,
    seed: int = 0,
) -> tuple[list[CalibrationTask], HarvestReport]:
    """Turn a capture store into tasks (time order) and say what was dropped and why."""
    report = HarvestReport()
    requests: list[CapturedRequest] = []
    replays: dict[str, str] = {}
    for record in read_records(store):
        if isinstance(record, CapturedReplay):
            report.replays += 1
            replays.setdefault(record.body_sha256, record.answer)
        else:
            report.requests += 1
            requests.append(record)
    candidates: list[_Candidate] = []
    for record in sorted(requests, key=lambda r: r.time):
        reference = record.answer if record.answer and record.answer.strip() else None
        source = "passthrough"
        if reference is None and replays.get(record.body_sha256, "").strip():
            reference, source = replays[record.body_sha256], "replay"
        if reference is None:
            report.dropped["no_reference"] += 1
            continue
        outcome = task_from_capture(record, reference, source, min_context=min_context)
        if isinstance(outcome, str):
            report.dropped[outcome] += 1
        else:
            candidates.append(_Candidate(record.time, outcome))
    duplicates = find_duplicates(
        [_dedup_text(c.task) for c in candidates],
        groups=[f"{c.task.task_class}\n{normalize(c.task.question)}" for c in candidates],
    )
    unique = [c for c, dup in zip(candidates, duplicates, strict=True) if dup is None]
    report.dropped["duplicate"] += len(candidates) - len(unique)
    kept = _balance(unique, per_class, seed, report)
    for candidate in kept:
        report.kept[candidate.task.task_class] += 1
    return [c.task for c in kept], report


def task_from_capture(
    record: CapturedRequest, reference: str, reference_from: str, *, min_context: int = 0
) -> CalibrationTask | str:
    """The task a captured request makes, or the reason (a `DROP_REASONS` key) it makes none."""
    body = record.body
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "not_a_task"
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"),
        default=-1,
    )
    if last_user < 0:
        return "no_question"
    texts = _texts(messages[last_user].get("content"))
    if not any(text.strip() for text in texts):
        return "no_question"
    if len(texts) >= 2:
        question, context_parts = texts[-1], texts[:-1]
    else:
        head, question = split_question(texts[0])
        context_parts = [head]
    context = "\n\n".join(part.strip("\n") for part in context_parts if part.strip())
    if not context or not _compressible(body):
        return "nothing_compressible"
    if min_context and estimate_tokens(context) < min_context:
        return "short_context"
    history = [
        Turn(role=m["role"], content=text)
        for m in messages[:last_user]
        if isinstance(m, dict) and m.get("role") in ("user", "assistant")
        for text in ["\n\n".join(t for t in _texts(m.get("content")) if t.strip())]
        if text.strip()
    ]
    system_texts = _texts(body.get("system"))
    system = "\n\n".join(t for t in system_texts if t.strip()) or None
    try:
        return CalibrationTask(
            id=f"{record.task_class[:24]}-{record.body_sha256[:12]}",
            task_class=record.task_class,
            question=question.strip(),
            context=context,
            reference=reference.strip(),
            system=system,
            history=tuple(history),
            tags=(
                MODEL_ANSWER_TAG,
                f"reference-from:{reference_from}",
                f"class-source:{record.class_source}",
                "harvested",
            ),
        )
    except ValidationError:
        return "not_a_task"


def _texts(content: Any) -> list[str]:
    """The text of a message's content (a string, or its text blocks in order)."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]


def _compressible(body: dict[str, Any]) -> bool:
    """Whether the ladder has any text it may rewrite (the control arm counts its blocks)."""
    try:
        return compress_request(body, Arm("control")).total_blocks > 0
    except CompressionError:
        return False


def _dedup_text(task: CalibrationTask) -> str:
    turns = "\n".join(turn.content for turn in task.history)
    return f"{task.system or ''}\n{turns}\n{task.context}"


def _balance(
    candidates: list[_Candidate], per_class: int | None, seed: int, report: HarvestReport
) -> list[_Candidate]:
    """At most `per_class` per class, drawn at random (seeded) so no period dominates."""
    if per_class is None:
        return candidates
    by_class: dict[str, list[int]] = {}
    for index, candidate in enumerate(candidates):
        by_class.setdefault(candidate.task.task_class, []).append(index)
    rng = random.Random(seed)
    keep: set[int] = set()
    for name in sorted(by_class):
        indices = by_class[name]
        chosen = indices if len(indices) <= per_class else rng.sample(indices, per_class)
        keep.update(chosen)
        report.dropped["over_per_class"] += len(indices) - len(chosen)
    return [c for i, c in enumerate(candidates) if i in keep]

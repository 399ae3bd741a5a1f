"""Checks a calibration set runs on itself: no padding, no twins, no unfounded references.

A set padded with sentences drawn from a small pool flatters compression (repeated text is
what the rungs remove best), two tasks that ask the same question of the same context
count one piece of evidence twice, and a reference that names a person or a number its
context never mentions grades every answer against something the model could not know.
Each check returns the problems it found, as sentences that name the tasks.
"""

from __future__ import annotations

import re
import zlib
from collections import defaultdict
from collections.abc import Sequence

from tokenlens.tasks import CalibrationTask

#: The unit of repetition: a sentence of eight words or more, blanks normalised.
MIN_WORDS = 8
#: The share of a context's sentences that may also appear in other contexts.
MAX_SHARED = 0.10
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
#: A number as a reference writes it: 42, 3.8.1, 2024-05-01, 1,200, 12:30.
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:/-]\d+)*")
#: A name: a capitalised word that does not open a sentence.
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?:[A-Z][a-z]+)*\b")
#: Classes whose references are computed (a sum, a day count): their numbers need not
#: appear in the context, their names must.
COMPUTED_NUMBERS = frozenset({"numeric-reasoning"})


def sentences(text: str) -> set[str]:
    """The text's sentences of `MIN_WORDS` words or more, blanks normalised."""
    flat = " ".join(text.split())
    return {s for s in _SENTENCE_BREAK.split(flat) if len(s.split()) >= MIN_WORDS}


def shared_sentences(tasks: Sequence[CalibrationTask]) -> list[str]:
    """Tasks more than `MAX_SHARED` of whose context sentences appear in another context."""
    owners: dict[str, set[int]] = defaultdict(set)
    own = [sentences(task.context) for task in tasks]
    for k, found in enumerate(own):
        for sentence in found:
            owners[sentence].add(k)
    problems = []
    for k, found in enumerate(own):
        shared = [s for s in found if len(owners[s]) > 1]
        if found and len(shared) > MAX_SHARED * len(found):
            others = sorted({tasks[j].id for s in shared for j in owners[s] if j != k})
            problems.append(
                f"{tasks[k].id}: {len(shared)} of {len(found)} sentences also appear in "
                f"{', '.join(others[:3])}{' …' if len(others) > 3 else ''}"
            )
    return problems


def shared_context_and_question(tasks: Sequence[CalibrationTask]) -> list[str]:
    """Pairs of tasks that ask the same question of the same context."""
    seen: dict[tuple[str, str], str] = {}
    problems = []
    for task in tasks:
        key = (task.context, task.question)
        if key in seen:
            problems.append(f"{task.id}: same context and question as {seen[key]}")
        else:
            seen.setdefault(key, task.id)
    return problems


def unfounded(task: CalibrationTask, *, numbers: bool = True) -> list[str]:
    """The names (and, with `numbers`, the numbers) of the task's reference that its
    context, history and question never mention (names compared case-blind)."""
    seen = " ".join([task.context, task.question, *(turn.content for turn in task.history)])
    flat = " ".join(seen.split())
    folded = flat.casefold()
    missing = [name for name in _NAME.findall(task.reference) if name.casefold() not in folded]
    if numbers:
        digits = set(re.findall(r"\d+", flat))
        for number in _NUMBER.findall(task.reference):
            if number not in flat and not set(re.findall(r"\d+", number)) <= digits:
                missing.append(number)
    return missing


def unfounded_references(tasks: Sequence[CalibrationTask]) -> list[str]:
    problems = []
    for task in tasks:
        missing = unfounded(task)
        if missing:
            problems.append(
                f"{task.id}: the reference names {', '.join(missing)}, "
                "which its context never mentions"
            )
    return problems


def zlib_ratio(texts: Sequence[str]) -> float:
    """Median compressed/original size of the texts (zlib, level 9): padded prose drawn
    from a pool compresses far below real text of the same length."""
    ratios = sorted(
        len(zlib.compress(text.encode("utf-8"), 9)) / max(1, len(text.encode("utf-8")))
        for text in texts
    )
    return ratios[len(ratios) // 2] if ratios else float("nan")

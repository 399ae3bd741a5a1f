"""The bundled set checks itself: no padding shared between contexts, no task asked twice,
no reference that names what its context never says; and the real-text references are
read again here from the context the model sees, independently of the generator."""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime

import pytest

from tokenlens import taskcheck
from tokenlens.tasks import DEFAULT_TASKS_PATH, CalibrationTask, Turn, load_tasks

#: Names a written reference may add to its context, and why (read by hand).
WRITTEN_NAMES = {
    "instr-refund-reply-01": {"Support"},  # the reply signs off as the support team
    "code-spring-self-invocation-15": {"TransactionTemplate"},  # the fix it proposes
    "summ-contract-amend-18": {"Ltd"},  # "NIMBUS RECORDS LIMITED"
    "chat-rebooking-09": {"Amsterdam"},  # the context says AMS and Schiphol
}
WEEKDAYS = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}


@pytest.fixture(scope="module")
def tasks() -> list[CalibrationTask]:
    return load_tasks(DEFAULT_TASKS_PATH)


def _task(
    tid: str, context: str, question: str = "What?", reference: str = "x", **kw: object
) -> CalibrationTask:
    return CalibrationTask.model_validate(
        {
            "id": tid,
            "task_class": "extraction",
            "question": question,
            "context": context,
            "reference": reference,
            **kw,
        }
    )


FILLER = "Questions about this policy go to the People team via the internal help desk."


def test_the_checks_catch_a_pool_of_filler_a_twin_and_an_unfounded_name() -> None:
    words = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    own = [
        f"Sentence number {w} of this context says something of its own, in words." for w in words
    ]
    a = _task("a", " ".join(own) + " " + FILLER)
    b = _task("b", " ".join(s.replace("context", "memo") for s in own) + " " + FILLER)
    assert taskcheck.shared_sentences([a, b]) == []  # one sentence in eleven: 9 %, allowed
    padded = _task("c", FILLER + " A single sentence of its own, written for this one task only.")
    assert [p.split(":")[0] for p in taskcheck.shared_sentences([a, padded])] == ["c"]
    twin = _task("d", a.context)
    assert taskcheck.shared_context_and_question([a, twin]) == ["d: same context and question as a"]
    assert taskcheck.shared_context_and_question([a, _task("e", a.context, "Why?")]) == []
    wrong = _task("f", "Maria wrote the report on 12 May.", reference="Maria and Okafor, 13 May")
    assert taskcheck.unfounded(wrong) == ["Okafor", "13"]
    assert taskcheck.unfounded(wrong, numbers=False) == ["Okafor"]
    history = _task(
        "g",
        "No names here.",
        reference="As Okafor said",
        history=[Turn(role="user", content="Okafor said so.")],
    )
    assert taskcheck.unfounded(history) == []


def test_the_bundled_set_shares_no_padding_and_asks_nothing_twice(
    tasks: list[CalibrationTask],
) -> None:
    assert taskcheck.shared_sentences(tasks) == []
    assert taskcheck.shared_context_and_question(tasks) == []


def test_no_reference_names_what_its_context_never_says(tasks: list[CalibrationTask]) -> None:
    """Names are checked everywhere; numbers where the reference quotes its text (the
    real-text tasks, except those whose reference computes a count or a format)."""
    problems = []
    for task in tasks:
        quoted = bool(task.source) and "reference:computed" not in task.tags
        numbers = quoted and task.task_class not in taskcheck.COMPUTED_NUMBERS
        allowed = WRITTEN_NAMES.get(task.id, set()) | WEEKDAYS
        missing = [m for m in taskcheck.unfounded(task, numbers=numbers) if m not in allowed]
        if missing:
            problems.append(f"{task.id}: {missing}")
    assert problems == []


def test_every_real_text_task_names_its_files_and_their_licence(
    tasks: list[CalibrationTask],
) -> None:
    real = [t for t in tasks if "real-text" in t.tags]
    assert len(real) == 280
    for task in real:
        assert task.source, task.id
        for src in task.source:
            assert src.path.startswith("/usr/") and src.licence and src.version, task.id


def _entries(text: str) -> dict[str, tuple[datetime, str, str]]:
    """version -> (date, date as printed, entry text), read from a changelog excerpt."""
    out = {}
    for chunk in re.split(r"\n(?=\S+ \([^)]+\) [^;]+; urgency=)", text):
        head = re.match(r"\S+ \(([^)]+)\)", chunk)
        stamp = re.search(r"^ -- .+?  (.+)$", chunk, re.M)
        if head and stamp:
            date = datetime.strptime(stamp.group(1).strip(), "%a, %d %b %Y %H:%M:%S %z")
            printed = " ".join(stamp.group(1).split()[1:4])
            out.setdefault(head.group(1), (date, printed, chunk))
    return out


def _bugs(entry: str) -> list[int]:
    found = re.findall(r"closes:\s*((?:bug)?#?\d+(?:\s*,\s*(?:bug)?#?\d+)*)", entry, re.I)
    return sorted({int(n) for group in found for n in re.findall(r"\d+", group)})


def test_changelog_references_are_read_again_from_the_context(
    tasks: list[CalibrationTask],
) -> None:
    checked = 0
    for task in tasks:
        entries = _entries(task.context)
        versions = re.findall(r"version (\S+?)(?: and|,| closes| in|\?)", task.question)
        if task.id.startswith("extr-changelog-bugs-"):
            assert json.loads(task.reference) == _bugs(entries[versions[0]][2]), task.id
        elif task.id.startswith("num-changelog-days-"):
            (old, old_day, _), (new, new_day, _) = entries[versions[0]], entries[versions[1]]
            days = (new.date() - old.date()).days
            assert task.reference == f"{days} days ({old_day} to {new_day})", task.id
        elif task.id.startswith("num-changelog-bugs-"):
            closed = sorted({b for _, _, text in entries.values() for b in _bugs(text)})
            assert task.reference.startswith(f"{len(closed)} ("), task.id
        elif task.id.startswith("instr-changelog-uploads-"):
            lines = [f"{v} {d.strftime('%Y-%m-%d')}" for v, (d, _, _) in entries.items()]
            assert task.reference == "\n".join(reversed(lines)), task.id
        elif task.id.startswith("summ-changelog-history-"):
            assert f"lists {len(entries)} uploads" in task.reference, task.id
        else:
            continue
        checked += 1
    assert checked >= 100


def _signature(tree: ast.Module, qualname: str) -> str:
    owner, _, name = qualname.rpartition(".")
    scope = tree.body
    if owner:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner).body
    node = next(
        n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
    )
    return f"{name}({ast.unparse(node.args)})"


def test_code_references_are_read_again_from_the_context(tasks: list[CalibrationTask]) -> None:
    checked = 0
    for task in tasks:
        if task.id.startswith("code-stdlib-signature-"):
            qualname = re.findall(r"`([^`]+)`", task.question)[1]
            assert task.reference == f"`{_signature(ast.parse(task.context), qualname)}`"
        elif task.id.startswith("extr-stdlib-constants-"):
            tree = ast.parse(task.context)
            values = {
                t.id: n.value
                for n in tree.body
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            for name, value in json.loads(task.reference).items():
                assert ast.literal_eval(values[name]) == value, (task.id, name)
        elif task.id.startswith("instr-stdlib-functions-"):
            tree = ast.parse(task.context)
            names = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
            assert task.reference == " | ".join(names), task.id
        else:
            continue
        checked += 1
    assert checked >= 60


def test_man_page_references_are_what_the_page_prints(tasks: list[CalibrationTask]) -> None:
    mine = [t for t in tasks if t.id.startswith("lqa-man-")]
    assert len(mine) == 40
    for task in mine:
        flat = " ".join(task.context.split())
        if task.question.startswith("Which entry"):
            described = task.question.split(': "', 1)[1].rsplit('"?', 1)[0]
            # the entry as the page prints it, its description right after it
            starts = [m.start() for m in re.finditer(re.escape(task.reference), flat)]
            assert any(described in flat[at : at + 2_000] for at in starts), task.id
        else:
            assert flat.count(task.reference) == 1, task.id

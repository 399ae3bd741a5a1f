"""The task builders, one per class: each walks its pool of real files in a fixed order and
keeps a file only when its structure yields an unambiguous, checkable question.

`Pools` hands each file to one task at most (the big changelogs give several windows of
distinct entries), and `Overlap` refuses a context that repeats another's sentences.
One file past 500 lines on purpose: seven builders that share the pools and the checks,
read side by side; a builder alone is short.
"""

from __future__ import annotations

import ast
import functools
import glob
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import parse
from sources import Overlap, Source, man_text, read_gz, source

from tokenlens.tokens import estimate_tokens

LONG = (10_000, 50_000)
PER_PART = 20  # tasks per (class, kind): two kinds per class, 40 tasks per class


class Pools:
    def __init__(self, overlap: Overlap) -> None:
        self.overlap = overlap
        self.used: set[str] = set()
        man = sorted(glob.glob("/usr/share/man/man[158]/*.gz"))
        self.man = [p for p in man if not re.search(r"/(gcloud|git-|openssl-|perf-)", p)]
        logs: dict[str, str] = {}
        for path in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz")):
            logs.setdefault(_digest_of(path), path)  # binary packages of one source share one
        self.changelogs = sorted(logs.values())
        lib = sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
        self.stdlib = [
            p
            for p in lib
            if not re.search(
                r"/(test|tests|idle_test|site-packages|"
                r"dist-packages|lib2to3)/",
                p,
            )
        ]

    def take(self, path: str, text: str) -> Source | None:
        """The file's source record if it is unused and its text repeats no other context."""
        if path in self.used:
            return None
        found = source(path)
        if found is None or not self.overlap.admit(text):
            return None
        self.used.add(path)
        return found


def _digest_of(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def task(
    tid: str,
    cls: str,
    question: str,
    context: str,
    reference: str,
    sources: list[Source],
    tags: list[str],
    history: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": tid,
        "task_class": cls,
        "question": question,
        "context": context,
        "reference": reference,
    }
    if history:
        row["history"] = history
    row["tags"] = ["real-text", *tags]
    row["source"] = [s.row() for s in sources]
    return row


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def _in(tokens: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= tokens <= bounds[1]


def _collect(
    make: Callable[[], Iterator[dict[str, Any]]], count: int = PER_PART
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for row in make():
        out.append(row)
        if len(out) == count:
            return out
    raise SystemExit(f"only {len(out)} of {count} tasks found for {make.__name__}")


# --- changelog windows -----------------------------------------------------------------


def windows(
    pools: Pools, bounds: tuple[int, int], entries: tuple[int, int], *, every_window: bool = False
) -> Iterator[tuple[list[parse.Entry], str, str]]:
    """Runs of consecutive entries (newest first, as in the file) whose text is within
    `bounds` tokens and whose count is within `entries`; one per file unless
    `every_window` (then every disjoint run of a long file)."""
    for path in pools.changelogs:
        if path in pools.used:
            continue
        _text, size, found = _changelog(path)
        if size < bounds[0]:
            continue
        start = 0
        while start < len(found):
            run: list[parse.Entry] = []
            size = 0
            k = start
            while k < len(found) and size < bounds[0] and len(run) < entries[1]:
                run.append(found[k])
                size += estimate_tokens(found[k].text)
                k += 1
            if _in(size, bounds) and entries[0] <= len(run) <= entries[1]:
                yield run, "\n".join(e.text for e in run), path
                if not every_window:
                    break
            start = k


@functools.cache
def _changelog(path: str) -> tuple[str, int, list[parse.Entry]]:
    text = read_gz(path)
    return text, estimate_tokens(text), parse.changelog(text)


@functools.cache
def _python(path: str) -> tuple[str, int]:
    text = Path(path).read_text(encoding="utf-8")
    return text, estimate_tokens(text)


def _stdlib(pools: Pools, bounds: tuple[int, int]) -> Iterator[tuple[str, str]]:
    """(path, text) of the standard-library modules whose size is within `bounds` tokens."""
    for path in pools.stdlib:
        text, size = _python(path)
        if _in(size, bounds):
            yield path, text


# --- the classes -----------------------------------------------------------------------


def long_doc_qa(pools: Pools) -> list[dict[str, Any]]:
    def pages(bounds: tuple[int, int], kind: str) -> Iterator[dict[str, Any]]:
        for n, path in enumerate(pools.man):
            text = man_text(path)
            if not _in(estimate_tokens(text), bounds):
                continue
            options = parse.man_options(text)
            heads = Counter(o.head for o in options)
            sentences = Counter(o.sentence for o in options)
            flat = " ".join(text.split())
            good = [
                o
                for o in options
                if heads[o.head] == 1
                and sentences[o.sentence] == 1
                and flat.count(o.sentence) == 1
                and flat.count(o.head) >= 1
            ]
            optionlike = [o for o in good if o.head.startswith("-") or o.head.endswith("=")]
            good = optionlike if len(optionlike) >= 3 else good
            if len(good) < 3:
                continue
            option = good[len(good) // 2]
            src = pools.take(path, text)
            if src is None:
                continue
            name = Path(path).name.removesuffix(".gz")
            page, section = name.rsplit(".", 1)
            if n % 2:
                q = (
                    f"According to the {page}({section}) manual page above, what does "
                    f"`{option.head}` do? Answer with what the page says."
                )
                ref = option.sentence
            else:
                q = (
                    f"Which entry does the {page}({section}) manual page above describe as: "
                    f'"{option.sentence}"? Give it as the page prints it.'
                )
                ref = option.head
            tags = [f"source:man-{page}", f"size:{kind}"] + (
                ["fragile:one-line-clue"] if n % 2 else []
            )
            yield task(f"lqa-man-{kind}-{slug(page)}", "long-doc-qa", q, text, ref, [src], tags)

    return _collect(lambda: pages(LONG, "long"), PER_PART) + _collect(
        lambda: pages((1_500, 9_999), "short"), PER_PART
    )


def summarization(pools: Pools) -> list[dict[str, Any]]:
    def history() -> Iterator[dict[str, Any]]:
        for run, text, path in windows(pools, (10_500, 45_000), (8, 60), every_window=True):
            who = Counter(e.who for e in run).most_common(2)
            if len(who) > 1 and who[0][1] == who[1][1]:
                continue  # a tie: "the most uploads" would have two answers
            src = _window_source(pools, path, text)
            if src is None:
                continue
            newest, oldest = run[0], run[-1]
            pkg = newest.package
            q = (
                f"Summarize the history of {pkg} in the changelog excerpt above: how many "
                "uploads it lists, the oldest and the newest version with their dates, and "
                "who made the most uploads (with how many)."
            )
            ref = (
                f"The excerpt lists {len(run)} uploads of {pkg}, from {oldest.version} on "
                f"{oldest.printed} to {newest.version} on {newest.printed}; {who[0][0]} made the "
                f"most uploads ({who[0][1]})."
            )
            yield task(
                f"summ-changelog-history-{slug(pkg)}-{newest.day}",
                "summarization",
                q,
                text,
                ref,
                [src],
                [f"source:changelog-{pkg}", "size:long"],
            )

    def upload() -> Iterator[dict[str, Any]]:
        for run, text, path in windows(pools, (1_200, 6_000), (1, 6)):
            entry = max(run, key=lambda e: (3 <= len(e.changes) <= 8, len(e.changes)))
            items = entry.changes
            if not 3 <= len(items) <= 8 or sum(len(i) for i in items) > 1_600:
                continue
            src = pools.take(path, text)
            if src is None:
                continue
            q = (
                f"Summarize the upload of version {entry.version} in the changelog above: "
                "who uploaded it, when, to which distribution, and what it changed."
            )
            ref = (
                f"{entry.who} uploaded {entry.package} {entry.version} to {entry.dist} on "
                f"{entry.printed}. Its changes: " + " / ".join(items)
            )
            yield task(
                f"summ-changelog-upload-{slug(entry.package)}",
                "summarization",
                q,
                text,
                ref,
                [src],
                [f"source:changelog-{entry.package}", "size:short", "fragile:every-item"],
            )

    return _collect(history) + _collect(upload)


def _window_source(pools: Pools, path: str, text: str) -> Source | None:
    """Like `Pools.take`, but a long changelog may give several windows."""
    found = source(path)
    if found is None or not pools.overlap.admit(text):
        return None
    pools.used.add(path + "#window")
    return found


def extraction(pools: Pools) -> list[dict[str, Any]]:
    def bugs() -> Iterator[dict[str, Any]]:
        for run, text, path in windows(pools, (800, 5_000), (2, 8)):
            entry = next((e for e in run[1:] if 2 <= len(e.bugs) <= 10), None)
            if entry is None:
                continue
            src = pools.take(path, text)
            if src is None:
                continue
            q = (
                f"List the Debian bug numbers that the upload of version {entry.version} "
                "closes, as a JSON array of integers in ascending order."
            )
            yield task(
                f"extr-changelog-bugs-{slug(entry.package)}",
                "extraction",
                q,
                text,
                json.dumps(entry.bugs),
                [src],
                [f"source:changelog-{entry.package}", "fragile:buried-number"],
            )

    def constants() -> Iterator[dict[str, Any]]:
        for path, text in _stdlib(pools, (500, 15_000)):
            found = parse.constants(ast.parse(text))
            names = [
                k
                for k, v in found.items()
                if len(str(v)) <= 60
                and len(re.findall(rf"\b{k}\b\s*=", text)) == 1
                and (isinstance(v, str) or re.search(rf"\b{k}\s*=\s*{v}\b", text))
            ]
            if len(names) < 3:
                continue
            pick = [names[0], names[len(names) // 2], names[-1]]
            if len(set(pick)) < 3:
                continue
            src = pools.take(path, text)
            if src is None:
                continue
            module = _module(path)
            q = (
                f"What values does the module `{module}` above assign to "
                + ", ".join(f"`{n}`" for n in pick)
                + "? Answer with a JSON object mapping each name to its value."
            )
            ref = json.dumps({n: found[n] for n in pick})
            yield task(
                f"extr-stdlib-constants-{slug(module)}",
                "extraction",
                q,
                text,
                ref,
                [src],
                [f"source:python3.11-{module}"],
            )

    return _collect(bugs) + _collect(constants)


def _module(path: str) -> str:
    rel = Path(path).relative_to("/usr/lib/python3.11").with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def numeric_reasoning(pools: Pools) -> list[dict[str, Any]]:
    def days() -> Iterator[dict[str, Any]]:
        for run, text, path in windows(pools, (500, 4_000), (4, 10)):
            newer, older = run[1], run[-1]
            if newer.version == older.version:
                continue
            src = pools.take(path, text)
            if src is None:
                continue
            n = (newer.date.date() - older.date.date()).days
            q = (
                f"How many days passed between the upload of version {older.version} and "
                f"the upload of version {newer.version}, counting calendar days between the "
                "dates the changelog above prints?"
            )
            ref = f"{n} days ({older.printed} to {newer.printed})"
            yield task(
                f"num-changelog-days-{slug(newer.package)}",
                "numeric-reasoning",
                q,
                text,
                ref,
                [src],
                [f"source:changelog-{newer.package}"],
            )

    def bugs() -> Iterator[dict[str, Any]]:
        for run, text, path in windows(pools, (500, 4_000), (3, 10)):
            closed = sorted({b for e in run for b in e.bugs})
            if not 3 <= len(closed) <= 25:
                continue
            if sum(len(e.bugs) for e in run) == len(closed):
                pass  # no bug closed twice: the count is the plain sum
            src = pools.take(path, text)
            if src is None:
                continue
            q = (
                "How many distinct Debian bug numbers do the uploads in the changelog "
                "excerpt above close in total (the numbers in their Closes: notes)?"
            )
            ref = f"{len(closed)} (" + ", ".join(f"#{b}" for b in closed) + ")"
            yield task(
                f"num-changelog-bugs-{slug(run[0].package)}",
                "numeric-reasoning",
                q,
                text,
                ref,
                [src],
                [f"source:changelog-{run[0].package}", "fragile:counts"],
            )

    return _collect(days) + _collect(bugs)


def instruction_following(pools: Pools) -> list[dict[str, Any]]:
    def uploads() -> Iterator[dict[str, Any]]:
        for run, text, path in windows(pools, (400, 3_000), (4, 8)):
            src = pools.take(path, text)
            if src is None:
                continue
            q = (
                "List every upload in the changelog excerpt above, oldest first, one per "
                "line, exactly in the form `VERSION YYYY-MM-DD`, and write nothing else."
            )
            ref = "\n".join(f"{e.version} {e.day}" for e in reversed(run))
            yield task(
                f"instr-changelog-uploads-{slug(run[0].package)}",
                "instruction-following",
                q,
                text,
                ref,
                [src],
                [f"source:changelog-{run[0].package}", "fragile:every-item", "reference:computed"],
            )

    def functions() -> Iterator[dict[str, Any]]:
        for path, text in _stdlib(pools, (600, 6_000)):
            tree = ast.parse(text)
            names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
            if not 3 <= len(names) <= 12 or len(set(names)) != len(names):
                continue
            src = pools.take(path, text)
            if src is None:
                continue
            module = _module(path)
            q = (
                "Reply with only the names of the functions this file defines with a `def` "
                "at column 0 (not methods, not nested), in alphabetical order, separated by "
                '" | ", on one line, and nothing else.'
            )
            ref = " | ".join(sorted(names))
            yield task(
                f"instr-stdlib-functions-{slug(module)}",
                "instruction-following",
                q,
                text,
                ref,
                [src],
                [f"source:python3.11-{module}"],
            )

    return _collect(uploads) + _collect(functions)


def code_context(pools: Pools) -> list[dict[str, Any]]:
    def signatures() -> Iterator[dict[str, Any]]:
        for path, text in _stdlib(pools, LONG):
            tree = ast.parse(text)
            found = parse.defs(tree)
            names = Counter(d.node.name for d in found)
            good = [
                d
                for d in found
                if d.defaults >= 2
                and names[d.node.name] == 1
                and d.node.name.startswith("_")
                and not d.node.name.startswith("__")
            ]
            if not good:
                continue
            pick = good[len(good) // 2]
            src = pools.take(path, text)
            if src is None:
                continue
            module = _module(path)
            q = (
                f"In the module `{module}` above, what is the full parameter list of "
                f"`{pick.qualname}`, with every default value?"
            )
            yield task(
                f"code-stdlib-signature-{slug(module)}",
                "code-context",
                q,
                text,
                f"`{pick.signature}`",
                [src],
                [f"source:python3.11-{module}", "size:long"],
            )

    def calls() -> Iterator[dict[str, Any]]:
        for path, text in _stdlib(pools, (1_500, 9_999)):
            tree = ast.parse(text)
            found = parse.defs(tree)
            names = Counter(d.node.name for d in found)
            pick = None
            for d in found[len(found) // 3 :]:
                name = d.node.name
                private = name.startswith("_") and not name.startswith("__")
                if names[name] == 1 and len(name) >= 5 and private:
                    who = parse.callers(tree, name)
                    if 2 <= len(who) <= 5:
                        pick = (d, who)
                        break
            if pick is None:
                continue
            src = pools.take(path, text)
            if src is None:
                continue
            module = _module(path)
            d, who = pick
            q = (
                f"Which functions and methods in the module `{module}` above call "
                f"`{d.node.name}` (as `{d.node.name}(...)` or `obj.{d.node.name}(...)`)? Give "
                "their qualified names (Class.method) in the order they are defined."
            )
            yield task(
                f"code-stdlib-callers-{slug(module)}",
                "code-context",
                q,
                text,
                ", ".join(who),
                [src],
                [f"source:python3.11-{module}", "size:short", "fragile:counts"],
            )

    return _collect(signatures) + _collect(calls)


def chat_history(pools: Pools) -> list[dict[str, Any]]:
    def changelogs() -> Iterator[dict[str, Any]]:
        pending: tuple[list[parse.Entry], str, Source] | None = None
        for run, text, path in windows(pools, (300, 1_500), (2, 4)):
            src = pools.take(path, text)
            if src is None:
                continue
            if pending is None:
                pending = (run, text, src)
                continue
            (first, first_text, first_src), pending = pending, None
            a, b = first[0], run[0]
            gap = (b.date.date() - a.date.date()).days
            if gap == 0:
                continue
            later, earlier = (b, a) if gap > 0 else (a, b)
            history = [
                {
                    "role": "user",
                    "content": f"Here is the top of the Debian changelog of "
                    f"{a.package}:\n\n{first_text}\nWhat is its latest upload?",
                },
                {
                    "role": "assistant",
                    "content": f"The latest upload there is {a.package} "
                    f"{a.version}, uploaded by {a.who} on {a.printed}.",
                },
            ]
            q = (
                f"And this is the top of {b.package}'s changelog. Whose latest upload is more "
                f"recent, {a.package}'s or {b.package}'s, and by how many days?"
            )
            ref = (
                f"{later.package}'s: {later.package} {later.version} ({later.printed}) is "
                f"{abs(gap)} days more recent than {earlier.package} {earlier.version} "
                f"({earlier.printed})."
            )
            yield task(
                f"chat-changelogs-{slug(a.package)}-{slug(b.package)}",
                "chat-history",
                q,
                text,
                ref,
                [first_src, src],
                ["source:changelog-pair", "fragile:early-turn-fact", "reference:computed"],
                history,
            )

    def functions() -> Iterator[dict[str, Any]]:
        pending: tuple[parse.Def, str, str, Source] | None = None
        for path in pools.stdlib:
            if path in pools.used:
                continue
            text = Path(path).read_text(encoding="utf-8")
            tree = ast.parse(text)
            pick = next(
                (
                    d
                    for d in parse.defs(tree)
                    if "." not in d.qualname
                    and not d.node.name.startswith("_")
                    and 400 < len(ast.get_source_segment(text, d.node) or "") < 3_000
                ),
                None,
            )
            if pick is None:
                continue
            body = ast.get_source_segment(text, pick.node) or ""
            src = pools.take(path, body)
            if src is None:
                continue
            if pending is None:
                pending = (pick, body, _module(path), src)
                continue
            (f, f_body, f_module, f_src), pending = pending, None
            nf, ng = _arity(f), _arity(pick)
            if nf == ng:
                continue
            history = [
                {
                    "role": "user",
                    "content": f"From `{f_module}`:\n\n{f_body}\n\nWhat "
                    f"parameters does `{f.node.name}` take?",
                },
                {"role": "assistant", "content": f"`{f.signature}`"},
            ]
            g = pick.node.name
            q = (
                f"And this one is from `{_module(path)}`. Which takes more parameters, "
                f"`{f.node.name}` from before or `{g}` here? Count every parameter, "
                "including *args and **kwargs, and give both counts."
            )
            more = f.node.name if nf > ng else g
            ref = f"`{more}` takes more: `{f.node.name}` has {_count(nf)}, `{g}` has {_count(ng)}."
            yield task(
                f"chat-functions-{slug(f.node.name)}-{slug(g)}",
                "chat-history",
                q,
                body,
                ref,
                [f_src, src],
                ["source:python3.11-pair", "reference:computed"],
                history,
            )

    return _collect(changelogs) + _collect(functions)


def _count(n: int) -> str:
    return f"{n} parameter" + ("" if n == 1 else "s")


def _arity(d: parse.Def) -> int:
    a = d.node.args
    return (
        len(a.posonlyargs)
        + len(a.args)
        + len(a.kwonlyargs)
        + (a.vararg is not None)
        + (a.kwarg is not None)
    )


BUILDERS = {
    "code-context": code_context,
    "long-doc-qa": long_doc_qa,
    "summarization": summarization,
    "extraction": extraction,
    "numeric-reasoning": numeric_reasoning,
    "instruction-following": instruction_following,
    "chat-history": chat_history,
}

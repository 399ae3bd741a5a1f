"""Structure read from real text by code: changelog entries, man-page options, Python defs.

Questions and references are derived from this structure, so each reference is something
the context states (a version's date, a bug number, an option's description, a
function's parameters), never something a template planted.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from datetime import datetime

_HEAD = re.compile(r"^(\S+) \(([^)\s]+)\) ([^;]+); urgency=(\w+)", re.M)
_TRAILER = re.compile(r"^ -- (.+?) <([^>]+)>  (.+)$", re.M)
_CLOSES = re.compile(r"closes:\s*((?:bug)?#?\d+(?:\s*,\s*(?:bug)?#?\d+)*)", re.I)


@dataclass(frozen=True)
class Entry:
    package: str
    version: str
    dist: str
    urgency: str
    who: str
    date: datetime
    stamp: str  # the trailer's date as printed, e.g. "Fri, 25 Oct 2024 12:00:00 +0200"
    text: str  # the entry verbatim, head to trailer

    @property
    def bugs(self) -> list[int]:
        found: set[int] = set()
        for match in _CLOSES.finditer(self.text):
            found.update(int(n) for n in re.findall(r"\d+", match.group(1)))
        return sorted(found)

    @property
    def changes(self) -> list[str]:
        """The entry's top-level items ("  * ..."), each joined onto one line."""
        items: list[str] = []
        for line in self.text.splitlines()[1:]:
            if line.startswith("  * "):
                items.append(line[4:].strip())
            elif items and line.startswith("    "):  # a continuation or a sub-item
                items[-1] += " " + line.strip()
        return items

    @property
    def day(self) -> str:
        return self.date.strftime("%Y-%m-%d")

    @property
    def printed(self) -> str:
        """The day as the trailer prints it ("25 Oct 2024"), so a reference quotes it."""
        return " ".join(self.stamp.split()[1:4])


def changelog(text: str) -> list[Entry]:
    """The entries of a Debian changelog, newest first; malformed ones are left out."""
    entries: list[Entry] = []
    heads = list(_HEAD.finditer(text))
    for k, head in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        chunk = text[head.start() : end]
        trailer = _TRAILER.search(chunk)
        if trailer is None:
            continue
        try:
            date = datetime.strptime(trailer.group(3).strip(), "%a, %d %b %Y %H:%M:%S %z")
        except ValueError:
            continue
        body = chunk[: trailer.end()] + "\n"
        entries.append(
            Entry(
                head.group(1),
                head.group(2),
                head.group(3).strip(),
                head.group(4),
                trailer.group(1).strip(),
                date,
                trailer.group(3).strip(),
                body,
            )
        )
    return entries


#: A term (an option, a directive, a keyword) at 7 columns, its description deeper in.
_TERM = re.compile(r"^ {7}(\S[^\n]{0,58}?)\n((?: {9,}\S.*\n)+)", re.M)
#: A BSD-style entry: the option and its description on one line, then more lines.
_INLINE = re.compile(r"^ {7}(-\S+(?: \S+)?) {2,}(\S.*\n(?: {9,}\S.*\n)*)", re.M)


@dataclass(frozen=True)
class Option:
    head: str  # the term as printed, e.g. "-a, --all" or "Type="
    sentence: str  # the first sentence of its description, blanks normalised


def man_options(text: str) -> list[Option]:
    """Terms printed at 7 columns with a description indented further (options of most
    pages, directives of systemd's, keywords of others)."""
    out: list[Option] = []
    for pattern in (_TERM, _INLINE):
        for match in pattern.finditer(text):
            head = " ".join(match.group(1).split())
            if head.endswith((".", ":")) or len(head.split()) > 6:
                continue  # a sentence of a paragraph, not a term
            body = " ".join(match.group(2).split())
            # a sentence ends before a capital ("i.e. a file" goes on)
            first = re.split(r"(?<=[a-z0-9)][.!?])\s+(?=[A-Z])", body, maxsplit=1)[0]
            if "\u2010 " in first:
                continue  # a word hyphenated across lines: not verbatim in the text
            if 6 <= len(first.split()) <= 40 and first.endswith("."):
                out.append(Option(head, first))
    return out


@dataclass(frozen=True)
class Def:
    qualname: str
    signature: str  # "name(a, b=1, *, c=None)"
    node: ast.FunctionDef | ast.AsyncFunctionDef
    defaults: int


def defs(tree: ast.Module) -> list[Def]:
    """Every function and method (one level of classes), with its signature as source."""
    out: list[Def] = []

    def add(node: ast.AST, prefix: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            count = len(args.defaults) + sum(d is not None for d in args.kw_defaults)
            out.append(Def(prefix + node.name, f"{node.name}({ast.unparse(args)})", node, count))

    for node in tree.body:
        add(node, "")
        if isinstance(node, ast.ClassDef):
            for inner in node.body:
                add(inner, node.name + ".")
    return out


def callers(tree: ast.Module, name: str) -> list[str]:
    """Qualified names of the functions and methods whose bodies call `name` (bare or as
    an attribute), in the order they are defined."""
    found: list[str] = []
    for item in defs(tree):
        for node in ast.walk(item.node):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == name:
                    found.append(item.qualname)
                    break
    return found


def constants(tree: ast.Module) -> dict[str, object]:
    """Top-level UPPER_CASE names bound once to a plain literal (str, int, float)."""
    seen: dict[str, list[object]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", target.id):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                    seen.setdefault(target.id, []).append(value)
    return {k: v[0] for k, v in seen.items() if len(v) == 1}

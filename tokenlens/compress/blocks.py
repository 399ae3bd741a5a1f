"""The structure-aware gate: typed blocks of a text, and which ones lossy rungs may touch.

The seed's gate judged a whole document: one code fence disqualified every paragraph of a
markdown spec, so a real spec saved nothing. Here the decision is per block. A text is cut
into blocks whose concatenation is the text again, byte for byte; each block gets a kind,
and only prose-like kinds (`ELIGIBLE_KINDS`) are open to `prune`, `select` and
`llmlingua2`. Code (fenced, indented or bare), tables, JSON, diffs, stack traces, logs,
HTML, headings and XML-style tag lines are never eligible, so those rungs cannot alter them.

The classifier leans conservative: a paragraph that merely *looks* like code is called
code, because wrongly skipping prose costs a few tokens while wrongly pruning code costs
the answer.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

#: Kinds that rungs 3-5 may rewrite. Everything else passes through byte-identical.
ELIGIBLE_KINDS: frozenset[str] = frozenset({"prose", "list", "quote"})
#: Kinds that carry no text worth compressing or counting as a block.
BLANK = "blank"

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_TAG_LINE = re.compile(r"^\s*<(/?)([A-Za-z][\w.:-]*)(\s+[^<>]*)?/?>\s*$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)+\|?\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
_QUOTE = re.compile(r"^\s*>")
_TRACE_LINE = re.compile(
    r"^(Traceback \(most recent call last\)|\s+File \".*\", line \d+|\s+at [\w$.<>/]+[(:]"
    r"|\s*Caused by: |\w+(\.\w+)*(Error|Exception): )"
)
_DIFF_LINE = re.compile(r"^(diff --git |@@ -\d|\+\+\+ |--- a/|index [0-9a-f]{6,}\.\.)")
_LOG_LINE = re.compile(
    r"^\s*\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}|"
    r"(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b)"
)
_CODE_START = re.compile(
    r"^\s*(def |class |import |from \S+ import |return\b|if \(|for \(|while \(|function\b|"
    r"const |let |var |public |private |protected |static |#include|package |func |fn |"
    r"impl |struct |enum |SELECT |INSERT |UPDATE |DELETE |CREATE |\$ |>>> |@\w+)"
)
_HTML_TAG_TEXT = """
    html head body div span p a script style meta link title table tr td th thead tbody ul
    ol li br hr img form input button nav footer header section article main h1 h2 h3 h4 h5
    h6 iframe noscript svg label select option textarea
"""
_HTML_TAGS = frozenset(_HTML_TAG_TEXT.split())
RULE_CHARS = frozenset("-=*_~#+.·•─━═┄┈▬■□◆◇<>/\\|")
_HTML_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)[\s>/]")

#: Matches every line that `_DIFF_LINE`, `_TRACE_LINE` or `_LOG_LINE` matches.
_SPECIAL_LINE = re.compile(
    "^(?:" + "|".join(p.pattern[1:] for p in (_DIFF_LINE, _TRACE_LINE, _LOG_LINE)) + ")"
)
#: Matches every line that one of the line-start tests below could match (special lines,
#: indented code, quotes, list items, code starts): a paragraph where no line does is
#: decided by the remaining three tests.
_ANY_HEAD = re.compile(
    "^(?:"
    + "|".join(p.pattern[1:] for p in (_SPECIAL_LINE, _QUOTE, _LIST_ITEM, _CODE_START))
    + "|    |\t)"
)
_SYMBOLS = re.compile(r"[{}\[\]<>=;$\\|]")
_SYMBOL_BYTES = b"{}[]<>=;$\\|"


def _symbol_count(text: str) -> int:
    """``len(_SYMBOLS.findall(text))``, three times faster: those characters are ASCII, and
    in UTF-8 an ASCII byte is always that character (``surrogatepass`` keeps any text
    encodable), so deleting their bytes counts them."""
    data = text.encode("utf-8", "surrogatepass")
    return len(data) - len(data.translate(None, _SYMBOL_BYTES))


class Block(NamedTuple):
    """A run of whole lines of one kind. `text` keeps its line endings verbatim.

    A named tuple rather than a frozen dataclass: as immutable, and several times cheaper
    to build (a long document has thousands of blocks).
    """

    kind: str
    text: str
    lang: str = ""  # a fence's info string (first word, lowercased)

    @property
    def eligible(self) -> bool:
        """May rungs 3-5 (prune, select, llmlingua2) rewrite this block?"""
        return self.kind in ELIGIBLE_KINDS

    @property
    def is_blank(self) -> bool:
        return self.kind == BLANK


def join(blocks: Iterable[Block]) -> str:
    """Inverse of `segment`: `join(segment(t)) == t` for every text."""
    return "".join(block.text for block in blocks)


def counted(blocks: Sequence[Block]) -> list[Block]:
    """The blocks that count in eligible/total figures (blank separators do not)."""
    return [block for block in blocks if not block.is_blank]


def segment(text: str) -> list[Block]:
    """Cut `text` into typed blocks whose concatenation is `text`, byte for byte.

    Lines that open a block (blank lines, fences, headings, tag lines) are found and typed
    first; the runs of lines between them are paragraphs, classified as a whole, once per
    distinct paragraph text in the call.
    """
    lines = text.splitlines(keepends=True)
    n = len(lines)
    openers, fences = _opening_lines(lines)
    starters = list(openers)  # in line order
    get = openers.get
    blocks: list[Block] = []
    append = blocks.append
    made: dict[str, list[Block]] = {}  # a paragraph's blocks, by its text: it may repeat
    i = 0
    while i < n:
        opener = get(i)
        if opener is _BLANK_LINE:
            end = i + 1
            while get(end) is _BLANK_LINE:
                end += 1
            append(Block(BLANK, lines[i] if end == i + 1 else "".join(lines[i:end])))
            i = end
        elif opener is None or opener is _FALSE_FENCE:
            following = bisect_right(starters, i)
            end = starters[following] if following < len(starters) else n
            paragraph = lines[i:end]
            body = "".join(paragraph)
            found = made.get(body)
            if found is None:  # (the same text splits into the same lines: same blocks)
                if "|" in body:  # may hold a table (its delimiter row has a pipe)
                    found = made[body] = _split_paragraph(paragraph)
                else:
                    found = made[body] = [Block(_classify(body, paragraph), body)]
            blocks.extend(found)
            i = end
        elif opener is _HEADING_LINE:
            append(Block("heading", lines[i]))
            i += 1
        elif isinstance(opener, str):  # a tag line, typed "html" or "tag"
            append(Block(opener, lines[i]))
            i += 1
        else:
            end = _fence_end(lines, fences, i, opener.group(1))
            info = opener.group(2).strip().split()
            append(Block("fence", "".join(lines[i:end]), info[0].lower() if info else ""))
            i = end
    return blocks


#: Characters other than "\n" at which `splitlines` breaks a line.
_OTHER_BREAKS = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: Values of `_opening_lines` that need no match object.
_BLANK_LINE = object()
_HEADING_LINE = object()
_FALSE_FENCE = object()


def newline_breaks_only(text: str, line_count: int | None = None) -> bool:
    """Are `splitlines`' line starts exactly the starts after each "\n" (and 0)?

    Whole-text scans rely on it. `splitlines` also breaks at a lone "\r", \v, \f,
    \x1c-\x1e, \x85, \u2028 and \u2029; a text holding one of those before its end has
    more lines than newlines and is handled line by line instead.
    `line_count` is ``len(text.splitlines())`` when the caller has it.
    """
    if line_count is None:
        if not any(char in text for char in _OTHER_BREAKS):
            return True
        line_count = len(text.splitlines())
    return line_count == text.count("\n") + (not text.endswith("\n") and bool(text))


def _opening_lines(lines: Sequence[str]) -> tuple[dict[int, Any], list[int]]:
    """Every line that ends the paragraph above it, with what it opens; and the fence lines.

    Values: `_BLANK_LINE`, `_HEADING_LINE`, a tag line's kind (``html`` or ``tag``), a
    `_FENCE_OPEN` match, or `_FALSE_FENCE`: a ```` ```a`b ```` line (a backtick in a
    backtick fence's info string) is no fence, yet ends a paragraph like one. The kinds
    are told apart by the first non-blank character, which also rules out almost every
    other line with one cheap test.
    """
    found: dict[int, Any] = {}
    fences: list[int] = []
    for i, line in enumerate(lines):
        head = line.lstrip()[:1]
        if head not in "`~#<":  # ("" is in it: a blank line)
            continue
        if not head:
            found[i] = _BLANK_LINE
        elif head == "#":
            if _HEADING.match(line):
                found[i] = _HEADING_LINE
        elif head == "<":
            if tag := _TAG_LINE.match(line):
                found[i] = "html" if tag.group(2).lower() in _HTML_TAGS else "tag"
        elif fence := _FENCE_OPEN.match(line.rstrip("\r\n")):
            if fence.group(1)[0] == "`" and "`" in fence.group(2):
                found[i] = _FALSE_FENCE  # (cannot close a fence either: a closer has no info)
            else:
                found[i] = fence
                fences.append(i)
    return found, fences


def _fence_end(lines: Sequence[str], fences: Sequence[int], start: int, opener: str) -> int:
    """Index after the closing fence (or the end of text for an unclosed fence).

    A closing fence is a line `_opening_lines` lists in `fences`: only those are tried.
    """
    closer = _closer(opener[0], len(opener))
    for k in range(bisect_right(fences, start), len(fences)):
        j = fences[k]
        if closer.match(lines[j].rstrip("\r\n")):
            return j + 1
    return len(lines)


@lru_cache(maxsize=64)
def _closer(char: str, width: int) -> re.Pattern[str]:
    return re.compile(r"^ {0,3}" + re.escape(char) + "{" + str(width) + r",}\s*$")


def _split_paragraph(lines: Sequence[str]) -> list[Block]:
    """Classify one paragraph; a table inside it becomes its own block."""
    text = "".join(lines)
    if "|" in text:  # a table's delimiter row holds a pipe
        for k in range(1, len(lines)):
            if _TABLE_SEPARATOR.match(lines[k]) and "|" in lines[k - 1]:
                start = k - 1
                end = k + 1
                while end < len(lines) and "|" in lines[end]:
                    end += 1
                out: list[Block] = []
                if start > 0:
                    out.extend(_split_paragraph(lines[:start]))
                out.append(Block("table", "".join(lines[start:end])))
                if end < len(lines):
                    out.extend(_split_paragraph(lines[end:]))
                return out
    return [Block(_classify(text, lines), text)]


def is_separator(line: str) -> bool:
    """A decorative rule: five or more of one punctuation character (spaces allowed)."""
    bare = line.strip()
    if bare[:1] not in RULE_CHARS:  # cheap rejection of almost every line
        return False
    bare = bare.replace(" ", "")
    return len(bare) >= 5 and bare.count(bare[0]) == len(bare)


def classify_paragraph(lines: Sequence[str]) -> str:
    """The kind of a paragraph that holds no fence, heading, tag line or table."""
    return _classify("".join(lines), lines)


def _classify(text: str, lines: Sequence[str]) -> str:
    """`classify_paragraph` with the joined text at hand. Tests run in a fixed order.

    Most paragraphs are a line or two of prose, so speed is in skipping work: one
    combined test stands for the diff, trace and log tests, the all-lines tests look at
    the first line before the others, HTML tags are found once, "ends like code" needs
    no regex.
    """
    stripped = text.strip()
    n = len(lines)
    first = lines[0]
    if is_separator(first) and all(is_separator(line) for line in lines):
        return "rule"
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
        except ValueError:
            return "code"
        return "json"
    needed = n + (n == 1)
    if not any(map(_ANY_HEAD.match, lines)):  # the usual prose paragraph
        if "<" in stripped:
            tags = _HTML_TAG.findall(stripped)
            if len(tags) >= 2 and any(name.lower() in _HTML_TAGS for _, name in tags):
                return "html"
        codey = sum(map(_ends_like_code, lines))
        if codey * 2 >= needed or _symbol_count(stripped) / len(stripped) > 0.12:
            return "code"
        return "prose"
    if any(_SPECIAL_LINE.match(line) for line in lines):  # a diff, trace or log line
        if any(_DIFF_LINE.match(line) for line in lines):
            return "diff"
        if any(_TRACE_LINE.match(line) for line in lines):
            return "trace"
        if sum(1 for line in lines if _LOG_LINE.match(line)) * 2 >= needed:
            return "log"
    if "<" in stripped:
        tags = _HTML_TAG.findall(stripped)
        if len(tags) >= 2 and any(name.lower() in _HTML_TAGS for _, name in tags):
            return "html"
    if first.startswith(("    ", "\t")) and all(line.startswith(("    ", "\t")) for line in lines):
        return "prose" if _indented_prose(stripped, lines) else "code"
    if _QUOTE.match(first) and all(_QUOTE.match(line) for line in lines):
        return "quote"
    if _LIST_ITEM.match(first):
        return "list"
    codey = sum(1 for line in lines if _CODE_START.match(line) or _ends_like_code(line))
    if codey * 2 >= needed or _symbol_count(stripped) / len(stripped) > 0.12:
        return "code"
    return "prose"


#: A word of running text: letters (an apostrophe or hyphen inside), then at most one mark.
_WORD = re.compile(r"^[(\"'“‘]?[A-Za-z][A-Za-z'’‐-]*[)\"'”’]?[.,;:!?]?[)\"'”’]?$")
#: A sentence ends: a full stop, "?" or "!" before a blank or the end of the text.
_SENTENCE_END = re.compile(r"[.!?][)\"'”’]?(\s|$)")
#: A call or a subscript-free code token: a name right before "(" (a man page's "less(1)"
#: section reference excepted), an assignment or comparison, an attribute of self.
_CODE_TOKEN = re.compile(r"[A-Za-z_]\((?!\d\w?\))|[=!<>]=|\s=\s|\bself\.")
#: Openers of a comment or docstring line in code.
_COMMENT_HEADS = ("#", "//", "/*", '"""', "'''")


def _indented_prose(stripped: str, lines: Sequence[str]) -> bool:
    """Is an all-indented paragraph running text (a man page, an RFC, quoted mail)?

    Indentation alone used to mean code, which left man pages (seven spaces) and RFCs
    (three) untouched. Nothing else here marks the paragraph as code (those tests ran
    before), so it counts as prose only on positive evidence: at least eight words, seven
    in ten of its whitespace-separated pieces plain words, a sentence that ends, every line
    holding a word, no call, assignment or comparison, no line that opens or ends like
    code or a comment. An indented shell command, config line, code without a keyword, or
    a line of code carrying a sentence in a string stays code.
    """
    pieces = stripped.split()
    words = sum(1 for piece in pieces if _WORD.match(piece))
    if words < 8 or words < 0.7 * len(pieces) or not _SENTENCE_END.search(stripped):
        return False
    if _CODE_TOKEN.search(stripped):
        return False
    for line in lines:
        bare = line.strip()
        if (
            not any(char.isalpha() for char in bare)
            or bare.startswith(_COMMENT_HEADS)
            or _CODE_START.match(bare)
            or _ends_like_code(bare)
        ):
            return False
    return True


def _ends_like_code(line: str) -> bool:
    """Does the line end (before trailing blanks) in ``;`` ``{`` ``}`` ``=>`` or ``) :``?

    The same as searching ``[;{}]\\s*$|\\)\\s*:\\s*$|=>\\s*$`` in it, without a scan.
    """
    end = line.rstrip()
    if end.endswith((";", "{", "}", "=>")):
        return True
    return end.endswith(":") and end[:-1].rstrip().endswith(")")

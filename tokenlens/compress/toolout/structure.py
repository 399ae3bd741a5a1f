"""The skeleton lines of common tool outputs: what a line-eliding rung removes last.

A reader of a shortened output can still find their way when its skeleton is whole: every
commit's header and subject in ``git log``, every entry's heading and signature in a
Debian changelog, every test's result and the summary of a test run, every file that a
search matched, every definition in a file read. These are properties of the formats,
found from the lines alone (the rungs stay a pure function of the block and its call), so
the removed lines are bodies: commit messages past their subject, per-file stat lines,
changelog bullets, further hits in a file already shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tokenlens.compress.toolout.lines import GREP_HIT
from tokenlens.compress.toolout.numbered import DEFINITION, HEADING

#: Lines that start a format's unit: a commit's header lines and its stat summary, a
#: Debian changelog entry's heading and its signature.
_UNIT = re.compile(
    r"(?:commit [0-9a-f]{7,64}\b|Merge: |Author: |Date: | \d+ files? changed\b"
    r"|\S+ \([^)\s]+\) [^;]*; *urgency=| -- .+ <[^>]*> +\S)"
)
_TEST_RESULT = re.compile(
    r"\b(?:PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b|^=+ .* =+$|^_+ .* _+$|^(?:ok|not ok) \d"
)
#: A line number before the text (``cat -n``, a read tool's ``1→``).
_NUMBER = re.compile(r"^\s*\d+[\t:|→ ]")


def skeleton(lines: Sequence[str]) -> set[int]:
    """Indices of the lines that carry the output's skeleton (see the module docstring)."""
    found: set[int] = set()
    last_file: str | None = None
    for i, line in enumerate(lines):
        hit = GREP_HIT.match(line)
        text = hit["text"] if hit else _NUMBER.sub("", line, count=1)
        if hit and hit["path"] != last_file:
            found.add(i)  # the first hit of each file: no matched file goes unseen
            last_file = hit["path"]
        if (
            _UNIT.match(line)
            or DEFINITION.match(text)
            or HEADING.match(text)
            or _TEST_RESULT.search(line)
        ):
            found.add(i)
        if line.startswith("    ") and i >= 2 and not lines[i - 1] and lines[i - 2][:5] == "Date:":
            found.add(i)  # a commit's subject
    return found

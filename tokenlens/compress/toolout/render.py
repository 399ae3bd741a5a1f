"""What a terminal would show: the rendering codecs (ANSI codes, CR overwrites, trailing blanks).

A tool's raw bytes carry things a reader never sees: colour escapes, a progress bar that
rewrites its own line with ``\\r``, spaces at the end of a line, blank lines after the
last one. Removing them changes no visible character, so the fidelity check compares
*rendered* lines on both sides, and a compressor may render without saying so. Rendering
is idempotent (``render(render(t)) == render(t)``), which is what makes it a lossless
rewrite in the only sense that matters to a reader: the decode of a rendered text is
itself, and it equals the render of the original exactly.
"""

from __future__ import annotations

import re

#: CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks), and the
#: two-byte escapes; after ECMA-48.
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """`text` without terminal escape sequences."""
    return ANSI.sub("", text) if "\x1b" in text else text


def resolve_cr(line: str) -> str:
    """One line as shown after its carriage returns: each piece overwrites from column 0.

    ``"10%\\r50%\\r100%"`` shows ``100%``; ``"abc\\r"`` (a CRLF ending) shows ``abc``.
    """
    if "\r" not in line:
        return line
    shown = ""
    for piece in line.split("\r"):
        shown = piece + shown[len(piece) :]
    return shown


def render_line(line: str) -> str:
    """One line as a reader sees it: escapes gone, overwrites applied, no trailing blanks."""
    return resolve_cr(strip_ansi(line)).rstrip()


def render_lines(text: str) -> list[str]:
    """The visible lines of a tool output; blank lines after the last visible one dropped."""
    lines = [render_line(line) for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def render(text: str) -> str:
    """The rendering codec's encode: the visible text, lines joined by ``\\n``."""
    return "\n".join(render_lines(text))

"""Rung 1, `minify`: compact structure without changing what it says.

- JSON (a bare JSON paragraph, a ```json fence whose body parses, or a whole text that is
  JSON) loses the whitespace between tokens. Literals are copied character for character,
  so ``1.50`` stays ``1.50`` and key order is kept.
- Markdown tables lose their cell padding (``| a    | b |`` -> ``|a|b|``) and their delimiter
  rows shrink to ``---``.
- HTML loses its boilerplate: comments, ``<script>``, ``<style>``, ``<meta>``, ``<link>``,
  ``<noscript>``, the doctype, and whitespace between tags.

Other code fences are left alone: only JSON's whitespace is provably meaningless.
"""

from __future__ import annotations

import json
import re

from tokenlens.compress.blocks import Block, segment

_TABLE_DELIMITER_CELL = re.compile(r"^\s*(:?)-+(:?)\s*$")
_HTML_JUNK = (
    re.compile(r"<!--.*?-->", re.DOTALL),
    re.compile(r"<script\b[^>]*>.*?</script\s*>", re.DOTALL | re.IGNORECASE),
    re.compile(r"<style\b[^>]*>.*?</style\s*>", re.DOTALL | re.IGNORECASE),
    re.compile(r"<noscript\b[^>]*>.*?</noscript\s*>", re.DOTALL | re.IGNORECASE),
    re.compile(r"<(?:meta|link)\b[^>]*>", re.IGNORECASE),
    re.compile(r"<!DOCTYPE[^>]*>", re.IGNORECASE),
)
_BETWEEN_TAGS = re.compile(r">\s+<")
_HTML_DOCUMENT = re.compile(r"^\s*(<!DOCTYPE html|<html\b)", re.IGNORECASE)


def apply_minify(text: str, blocks: list[Block] | None = None) -> str:
    """Structural compaction of JSON, tables and HTML (see module docstring).

    `blocks` is `segment(text)` when the caller has it already.
    """
    whole = compact_json(text)
    if whole is not None:
        return whole
    if _HTML_DOCUMENT.match(text):
        return strip_html(text)
    out: list[str] = []
    for block in segment(text) if blocks is None else blocks:
        out.append(_minify_block(block))
    return "".join(out)


def _minify_block(block: Block) -> str:
    if block.kind == "json":
        return _keep_newline(block.text, compact_json(block.text))
    if block.kind == "fence" and block.lang == "json":
        return _minify_json_fence(block.text)
    if block.kind == "table":
        return compact_table(block.text)
    if block.kind == "html":
        return _keep_newline(block.text, strip_html(block.text))
    return block.text


def _keep_newline(original: str, new: str | None) -> str:
    if new is None:
        return original
    ending = original[len(original.rstrip("\r\n")) :]
    return new.rstrip("\r\n") + ending


def _minify_json_fence(text: str) -> str:
    lines = text.splitlines(keepends=True)
    if len(lines) < 3:
        return text
    body = "".join(lines[1:-1])
    compact = compact_json(body)
    if compact is None:
        return text
    return lines[0] + compact + "\n" + lines[-1]


def compact_json(text: str) -> str | None:
    """`text` without insignificant whitespace, or None when it is not JSON (a scalar is not)."""
    stripped = text.strip()
    if stripped[:1] not in "{[":
        return None
    try:
        json.loads(stripped)
    except ValueError:
        return None
    out: list[str] = []
    in_string = False
    escaped = False
    for ch in stripped:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif ch not in " \t\r\n":
            out.append(ch)
    return "".join(out)


def compact_table(text: str) -> str:
    """A markdown table without cell padding; escaped pipes (``\\|``) stay inside cells."""
    rows: list[str] = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        cells = _split_row(body)
        if cells is None:
            rows.append(line)
            continue
        if all(_TABLE_DELIMITER_CELL.match(cell) for cell in cells):
            cells = [_delimiter(cell) for cell in cells]
        else:
            cells = [cell.strip() for cell in cells]
        rows.append("|" + "|".join(cells) + "|" + ending)
    return "".join(rows)


def _split_row(row: str) -> list[str] | None:
    stripped = row.strip()
    if "|" not in stripped:
        return None
    cells = re.split(r"(?<!\\)\|", stripped)
    if stripped.startswith("|"):
        cells = cells[1:]
    if stripped.endswith("|") and not stripped.endswith("\\|"):
        cells = cells[:-1]
    return cells


def _delimiter(cell: str) -> str:
    match = _TABLE_DELIMITER_CELL.match(cell)
    assert match is not None
    return f"{match.group(1)}---{match.group(2)}"


def strip_html(text: str) -> str:
    """HTML without comments, scripts, styles, meta/link tags, doctype or inter-tag spaces."""
    for pattern in _HTML_JUNK:
        text = pattern.sub("", text)
    text = _BETWEEN_TAGS.sub("><", text)
    return text.strip()

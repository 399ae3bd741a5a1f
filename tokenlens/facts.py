"""Answer facts: exact values read by code from a tool's output, and how an answer holds one.

An agent task asks something whose answer is in the tool output it carries: which file and
line, which version, how many, which test failed, which commit. The capture script reads
those values from the output with code (never by hand) and stores them as `Fact`s; the fact
grader scores an answer by the share of its facts it states, and the fidelity check asks
whether a compressed output still holds them.

How a fact is found in a text (written out in docs/agent-traffic.md, keep the two in step):

* Both sides are normalised (`normalise`): Unicode NFKC, lower case, markdown emphasis,
  backticks and double quotes are dropped, thousands separators go (`1,024` is `1024`),
  a path's leading `./` and trailing `/` go, runs of whitespace become one space.
* `path`, `name`, `test`, `text`: the normalised value must occur with no word character
  (nor `.`, `/`, `-`) glued on either side, so `os.py` does not match `pos.py`, and a
  sentence's full stop after it is fine. A path may have more leading folders
  (`typing.py` is found in `/usr/lib/python3.11/typing.py`). A `name` made of 7 or more
  hex digits (an abbreviated commit hash) also matches a longer hash that starts with it.
* `path_line` (`path:line`): the path as above, followed within a few characters on the
  same line by the line number as `:N`, `line N`, `L N` or `#N`; or `line N` followed by
  `of`/`in` and the path.
* `number`: a number in the text with the same value (`1,024`, `1024` and `1024.0` agree);
  digits are needed, "twelve" does not count.
* `version`: the value with an optional `v` before it, not glued to other digits, so `1.2`
  does not match `1.2.3` and `3.1` does not match `13.1`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Fact", "FactKind", "fact_present", "facts_present", "normalise"]

FactKind = Literal["path_line", "path", "number", "version", "name", "test", "text"]


class Fact(BaseModel):
    """One exact answer fact, as it reads in the tool output it was taken from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FactKind
    value: str = Field(min_length=1)
    #: The `tool_use_id` of the tool_result the value was read from.
    source: str | None = None


_DECOR = re.compile(r"[`*\"\u201c\u201d\u2018\u2019]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DOT_SLASH = re.compile(r"(?<![\w./-])\./")
_TRAILING_SLASH = re.compile(r"(?<=[\w.}-])/(?=\.?(?:[\s,;:)\]]|$))")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")
_HEX = re.compile(r"^[0-9a-f]{7,}$")


def normalise(text: str) -> str:
    """The text as facts are matched against it (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = _DECOR.sub("", text)
    text = _THOUSANDS.sub("", text)
    text = _DOT_SLASH.sub("", text)
    text = _TRAILING_SLASH.sub("", text)
    return _SPACE.sub(" ", text).strip()


#: What may not touch a matched value on either side (a `.` only when a word follows it).
_BEFORE = r"(?<![\w./-])"
_AFTER = r"(?![\w/-]|\.\w)"
#: Before a path, a `/` may touch it: more leading folders name the same file.
_BEFORE_PATH = r"(?<![\w.-])"


@lru_cache(maxsize=4096)
def _value_pattern(kind: str, value: str) -> re.Pattern[str]:
    norm = normalise(value)
    body = re.escape(norm)
    if kind == "version":
        return re.compile(r"(?<![\w.])v?" + body + r"(?![\w]|\.\d)")
    if kind == "name" and _HEX.match(norm):
        return re.compile(_BEFORE + body + r"[0-9a-f]*" + _AFTER)
    if kind == "path_line":
        path, _, line = norm.rpartition(":")
        if not path or not line.isdigit():
            raise ValueError(f"path_line fact {value!r} is not 'path:line'")
        p = _BEFORE_PATH + re.escape(path) + _AFTER
        n = line + r"(?!\d)"
        after = p + r"[^\n]{0,12}?(?::|\bline\s*|\bl\s*|#)" + n
        before = r"\bline\s*" + n + r"\s*(?:of|in)\s+(?:file\s+)?" + p
        return re.compile(f"(?:{after})|(?:{before})")
    return re.compile((_BEFORE_PATH if kind == "path" else _BEFORE) + body + _AFTER)


def _number_value(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def fact_present(fact: Fact, text: str) -> bool:
    """True when `text` states `fact` (normalised as the module docstring says)."""
    norm = normalise(text)
    if fact.kind == "number":
        want = _number_value(normalise(fact.value))
        if want is None:
            return _value_pattern("text", fact.value).search(norm) is not None
        return any(_number_value(m) == want for m in _NUMBER.findall(norm))
    return _value_pattern(fact.kind, fact.value).search(norm) is not None


def facts_present(facts: Iterable[Fact], text: str) -> list[bool]:
    """`fact_present` for each fact, in order."""
    return [fact_present(fact, text) for fact in facts]

"""Redaction of captured text before anything is written: built-in rules plus the user's.

Why regexes and before the write: a capture store must never hold what the rules cover,
not even for a moment on disk, so every string of a record (request body, answer) is
rewritten in the writer thread before it is serialised. The built-ins cover what leaks
most often from prompts: e-mail addresses, API-key shapes, long digit runs (card,
account, phone numbers). `--capture-redact FILE` adds one Python regex per line (`#`
comments and blank lines skipped); each match becomes ``[REDACTED:custom]``.

What a captured request keeps: every dict key and every string value, at any depth, goes
through the rules (also inside `tool_use.input`, tool schemas, `metadata`). Three values are
the Messages API's own vocabulary and stay as they are, where the schema puts them and
only with the vocabulary's shape (`Redactor.request`): a message's `role` (`user` or
`assistant`), a content block's `type` (a lower-case identifier no built-in rule touches;
the user's rules are not run on it, so they cannot break the request's structure), and
the request's top-level `model` (a model-name shape no other rule touches). Anything else in
those places is redacted like any other text. Numbers, booleans and nulls are kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenLensError

#: The Messages API's own vocabulary, kept where the schema puts it (see the docstring).
ROLES = frozenset({"user", "assistant"})
BLOCK_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: Lower-case words joined by `-`, `.`, `_` or `:`, no run of 9 or more digits (the
#: digits rule's job, which this shape does; its dashes would join a date to the version).
MODEL_NAME = re.compile(r"(?!.*\d{9})[a-z][a-z0-9]*(?:[-._:][a-z0-9]+){0,15}")


@dataclass(frozen=True)
class Rule:
    """A pattern and its replacement. `hints`: literals (lower case) of which any match
    must contain one; a text without any skips the regex (most prompts hold no key).
    Both shortcuts are there because redaction is most of the capture writer's CPU."""

    name: str
    pattern: re.Pattern[str]
    replacement: str
    hints: tuple[str, ...] = ()
    #: A cheaper pattern every match also matches: no hit, no need to run `pattern`.
    gate: re.Pattern[str] | None = None

    def apply(self, text: str, lowered: str) -> str:
        if self.hints and not any(hint in lowered for hint in self.hints):
            return text
        if self.gate is not None and self.gate.search(text) is None:
            return text
        return self.pattern.sub(self.replacement, text)


BUILTIN_RULES: tuple[Rule, ...] = (
    Rule(
        "email",
        re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"),
        "[REDACTED:email]",
        ("@",),
    ),
    Rule(
        "api-key",
        re.compile(
            r"\b(?:sk-(?:ant-)?[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}"
            r"|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|eyJ[A-Za-z0-9_-]{10,}\."
            r"[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
            r"|(?i:bearer\s+)[A-Za-z0-9._~+/=-]{16,}"
        ),
        "[REDACTED:api-key]",
        ("sk-", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "aiza", "eyj", "bearer"),
    ),
    Rule(
        "secret-assignment",
        re.compile(
            r"(?i)\b((?:api[_-]?key|secret|token|passw(?:or)?d|access[_-]?key)[\"']?\s*[:=]\s*"
            r"[\"']?)[^\s\"',;]{8,}"
        ),
        r"\1[REDACTED:api-key]",
        ("key", "secret", "token", "passw"),
    ),
    Rule(
        "digits",
        re.compile(r"(?<!\d)\d(?:[ -]?\d){8,}(?!\d)"),
        "[REDACTED:digits]",
        gate=re.compile(r"\d[\d -]{7,}\d"),
    ),
)


def load_rules(path: Path) -> list[Rule]:
    """The user's rules, one regex per line; TokenLensError naming `file:line` if one is bad."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenLensError(f"--capture-redact {path}: cannot read ({exc})") from exc
    rules = []
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise TokenLensError(
                f"{path}:{lineno}: not a valid regular expression ({exc})"
            ) from exc
        if pattern.match(""):
            raise TokenLensError(f"{path}:{lineno}: the rule matches the empty string")
        rules.append(Rule(f"custom:{lineno}", pattern, "[REDACTED:custom]"))
    return rules


class Redactor:
    """Applies the user's rules first (they know their data), then the built-ins."""

    def __init__(self, extra: Sequence[Rule] = ()) -> None:
        self.rules = (*extra, *BUILTIN_RULES)
        self._model_rules = tuple(rule for rule in self.rules if rule.name != "digits")

    def text(self, value: str, rules: Sequence[Rule] | None = None) -> str:
        lowered = value.lower()
        for rule in self.rules if rules is None else rules:
            redacted = rule.apply(value, lowered)
            if redacted is not value:
                value, lowered = redacted, redacted.lower()
        return value

    def value(self, value: Any) -> Any:
        """A JSON value with every key and every string redacted, at any depth."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return self._dict(value, lambda _key, item: self.value(item))
        return value

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """A Messages request body, redacted; the API's vocabulary kept where it belongs."""

        def field(key: str, item: Any) -> Any:
            if key == "model" and isinstance(item, str) and self.is_model_name(item):
                return item
            if key == "messages" and isinstance(item, list):
                return [self._message(message) for message in item]
            if key == "system":
                return self._content(item)
            return self.value(item)

        return self._dict(body, field)

    def is_model_name(self, value: str) -> bool:
        """A model name's shape, and nothing any other rule would rewrite."""
        return (
            len(value) <= 100
            and MODEL_NAME.fullmatch(value) is not None
            and self.text(value, self._model_rules) == value
        )

    def _message(self, message: Any) -> Any:
        def field(key: str, item: Any) -> Any:
            if key == "role" and item in ROLES:
                return item
            if key == "content":
                return self._content(item)
            return self.value(item)

        return self._dict(message, field) if isinstance(message, dict) else self.value(message)

    def _content(self, content: Any) -> Any:
        """A `content` (or `system`): text, or a list of blocks."""
        if isinstance(content, list):
            return [self._block(block) for block in content]
        return self.value(content)

    def _block(self, block: Any) -> Any:
        def field(key: str, item: Any) -> Any:
            if key == "type" and isinstance(item, str) and self._is_block_type(item):
                return item
            if key == "content":  # a tool_result's own blocks
                return self._content(item)
            return self.value(item)

        return self._dict(block, field) if isinstance(block, dict) else self.value(block)

    def _is_block_type(self, value: str) -> bool:
        return BLOCK_TYPE.fullmatch(value) is not None and self.text(value, BUILTIN_RULES) == value

    def _dict(self, value: dict[str, Any], field: Callable[[str, Any], Any]) -> dict[str, Any]:
        """`value` with redacted keys; `field(key, item)` redacts each item."""
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = self.text(key)
            while name in out:  # two keys redacted to one name: keep both
                name += "'"
            out[name] = field(key, item)
        return out

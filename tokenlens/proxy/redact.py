"""Redaction of captured text before anything is written: built-in rules plus the user's.

Why regexes and before the write: a capture store must never hold what the rules cover,
not even for a moment on disk, so every string of a record (request body, answer) is
rewritten in the writer thread before it is serialised. The built-ins cover what leaks
most often from prompts: e-mail addresses, API-key shapes, long digit runs (card,
account, phone numbers). `--capture-redact FILE` adds one Python regex per line (`#`
comments and blank lines skipped); each match becomes ``[REDACTED:custom]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenLensError

#: Values that are the Messages API's own vocabulary, not content: never rewritten.
_SCHEMA_KEYS = frozenset({"type", "role", "model"})


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

    def text(self, value: str) -> str:
        lowered = value.lower()
        for rule in self.rules:
            redacted = rule.apply(value, lowered)
            if redacted is not value:
                value, lowered = redacted, redacted.lower()
        return value

    def value(self, value: Any) -> Any:
        """A JSON value with every content string redacted (keys and `_SCHEMA_KEYS` kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {
                key: item if key in _SCHEMA_KEYS else self.value(item)
                for key, item in value.items()
            }
        return value

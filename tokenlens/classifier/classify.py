"""Which task class a live request belongs to: header, then the classifier, then `default`.

Classification sits on the hot path of every request, so it must take well under a
millisecond, never fail, and give the same answer for the same request (a flaky
classifier would make the applied arm random). A wrong class is worse than none: it
applies an arm measured on another class, while `default` holds an arm certified for every
class. So the classifier may say "unsure", and then `default` applies.

Order: an application that knows better sends `x-tokenlens-class` (source "header"). A
policy that ships a learned classifier (`tokenlens.classifier.bundle`) decides next
(source "model"); below its confidence threshold the request goes to `default`. A policy
without one falls back to the hand-written rules (source "rules"), which are wrong far
more often (see docs/classifier.md). Everything else is source "default".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tokenlens.classifier.bundle import ClassifierBundle
from tokenlens.classifier.rules import LONG_DOC_CHARS, SCAN_CHARS, rule_class, split_question

__all__ = [
    "CLASS_HEADER",
    "DEFAULT_CLASS",
    "LONG_DOC_CHARS",
    "SCAN_CHARS",
    "Classification",
    "Source",
    "classify",
    "rule_class",
    "split_question",
]

CLASS_HEADER = "x-tokenlens-class"
DEFAULT_CLASS = "default"
_HEADER_VALUE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

#: How the class was decided; the dashboard and /metrics count requests by it.
Source = Literal["header", "model", "rules", "default"]


@dataclass(frozen=True)
class Classification:
    """The class a request is served as, and how that was decided.

    `confidence` is the classifier's top probability when source is "model" or when it was
    unsure (source "default"); None otherwise.
    """

    task_class: str
    source: Source
    confidence: float | None = None


def classify(
    body: Mapping[str, Any] | None,
    header: str | None,
    known: Collection[str],
    classifier: ClassifierBundle | None = None,
) -> Classification:
    """Header wins; else the classifier (or the rules without one); else `default`.

    `known` is the policy's class names; a class outside it maps to `default` too, so
    neither a client nor a classifier can grow the proxy's per-class tables without bound.
    `classifier` is the policy's `classifier` bundle when it ships one.
    """
    if header is not None:
        value = header.strip().lower()
        if _HEADER_VALUE.match(value):
            return Classification(value if value in known else DEFAULT_CLASS, "header")
    if body is None:
        return Classification(DEFAULT_CLASS, "default")
    if classifier is not None:
        found = classifier.predict(body)
        if found.label is not None and found.label in known:
            return Classification(found.label, "model", found.confidence)
        return Classification(DEFAULT_CLASS, "default", found.confidence)
    guess = rule_class(body)
    if guess is not None and guess in known:
        return Classification(guess, "rules")
    return Classification(DEFAULT_CLASS, "default")

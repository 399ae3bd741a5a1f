"""Parsing a structured (JSON-schema) reply, identically for every backend.

Why validate locally even when the API constrains output: the API form relaxes some
constraints (the SDK's schema transform moves `minimum`/`maximum` into descriptions), a
fallback path (forced tool, local grammar) may not enforce everything, and a judge reply
that is not a valid object must never become a grade. A reply that fails here raises
`InvalidOutputError`, which the retry layer retries within the same budget.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from tokenlens.models.retry import InvalidOutputError

__all__ = ["parse_structured", "validate_object"]


def validate_object(obj: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """Return `obj` if it is an object matching `schema`; else raise `InvalidOutputError`."""
    if not isinstance(obj, dict):
        raise InvalidOutputError(f"structured reply is a JSON {type(obj).__name__}, not an object")
    try:
        jsonschema.validate(obj, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise InvalidOutputError(
            f"structured reply does not match the schema at {where}: {exc.message}"
        ) from exc
    except jsonschema.SchemaError as exc:
        # Our own schema is wrong: no retry can fix that.
        raise ValueError(f"invalid JSON schema: {exc.message}") from exc
    return obj


def parse_structured(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Parse a reply's text as JSON and validate it against `schema`."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        preview = text.strip().replace("\n", " ")[:80]
        raise InvalidOutputError(
            f"structured reply is not valid JSON ({exc.msg} at char {exc.pos}); "
            f"it starts {preview!r}"
        ) from exc
    return validate_object(obj, schema)

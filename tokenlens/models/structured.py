"""Parsing a structured (JSON-schema) reply, identically for every backend.

Why validate locally even when the API constrains output: the API form relaxes some
constraints (the SDK's schema transform moves `minimum`/`maximum` into descriptions), a
fallback path (forced tool, local grammar) may not enforce everything, and a judge reply
that is not a valid object must never become a grade. A reply that fails here raises
`InvalidOutputError`, which the retry layer retries within the same budget.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from tokenlens.models.retry import InvalidOutputError

__all__ = ["parse_structured", "validate_object"]


def validate_object(obj: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """Return `obj` if it is an object matching `schema`; else raise `InvalidOutputError`."""
    if not isinstance(obj, dict):
        raise InvalidOutputError(f"structured reply is a JSON {type(obj).__name__}, not an object")
    error = best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(obj))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise InvalidOutputError(
            f"structured reply does not match the schema at {where}: {error.message}"
        )
    return obj


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Validator:
    """The validator of one schema, checked against its metaschema once: what
    `jsonschema.validate` does on every call (~1.4 ms of a judge reply's CPU, for a
    handful of distinct schemas a process ever sees)."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        # Our own schema is wrong: no retry can fix that.
        raise ValueError(f"invalid JSON schema: {exc.message}") from exc
    return cls(schema)


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

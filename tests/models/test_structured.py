"""Structured replies: parsed and checked against their schema, the schema checked once."""

from __future__ import annotations

import jsonschema
import pytest

from tokenlens.models.retry import InvalidOutputError
from tokenlens.models.structured import parse_structured, validate_object

SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "score": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["reasoning", "score"],
}


def test_a_matching_reply_comes_back_and_a_wrong_one_names_where() -> None:
    assert parse_structured('{"reasoning": "ok", "score": 70}', SCHEMA)["score"] == 70
    with pytest.raises(InvalidOutputError, match="at score: 170 is greater than"):
        parse_structured('{"reasoning": "ok", "score": 170}', SCHEMA)
    with pytest.raises(InvalidOutputError, match=r"at \(root\): 'score' is a required"):
        validate_object({"reasoning": "ok"}, SCHEMA)
    with pytest.raises(InvalidOutputError, match="JSON list, not an object"):
        validate_object([], SCHEMA)


def test_a_broken_schema_is_our_error_not_a_retryable_reply() -> None:
    with pytest.raises(ValueError, match="invalid JSON schema"):
        validate_object({"score": 1}, {"type": "object", "required": "score"})


def test_the_schema_is_checked_against_its_metaschema_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schema = {**SCHEMA, "title": "checked once"}  # a schema no other test has cached
    checks: list[object] = []
    cls = jsonschema.validators.validator_for(schema)
    original = cls.check_schema

    def counted(checked: object, *args: object, **kwargs: object) -> None:
        checks.append(checked)
        original(checked, *args, **kwargs)

    monkeypatch.setattr(cls, "check_schema", counted)
    for score in (1, 2, 3):
        validate_object({"reasoning": "r", "score": score}, schema)
    with pytest.raises(InvalidOutputError):
        validate_object({"reasoning": "r", "score": -1}, schema)
    assert len(checks) == 1

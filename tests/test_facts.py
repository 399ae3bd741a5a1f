"""Answer facts: how an answer is found to state a fact (the documented normalisation)."""

from __future__ import annotations

import pytest

from tokenlens.facts import Fact, fact_present, normalise


def present(kind: str, value: str, text: str) -> bool:
    return fact_present(Fact(kind=kind, value=value), text)  # type: ignore[arg-type]


def test_normalise_folds_case_decoration_separators_and_path_ends() -> None:
    assert normalise("In `./Lib/os.py/`, **1,024** lines") == "in lib/os.py, 1024 lines"


@pytest.mark.parametrize(
    ("value", "text", "expected"),
    [
        ("Lib/os.py", "It is in `./lib/os.py`.", True),
        ("Lib/os.py", "It is in lib/pos.py.", False),
        ("Lib/os.py", "see Lib/os.pyc", False),
        ("os.py", "it is /usr/lib/python3.11/os.py", True),
        ("os.py", "it is lib/_os.py", False),
        ("docs/", "the docs folder (docs)", True),
        ("a/{b}/", "It is `a/{b}/`.", True),
        ("a/b", "see a/b/.hidden", False),
    ],
)
def test_paths(value: str, text: str, expected: bool) -> None:
    assert present("path", value, text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("json/decoder.py:42", True),
        ("It is defined in `json/decoder.py`, line 42.", True),
        ("json/decoder.py (line 42)", True),
        ("line 42 of json/decoder.py", True),
        ("json/decoder.py:420", False),
        ("json/decoder.py, line 41", False),
        ("line 42 is where json/encoder.py has it", False),
    ],
)
def test_path_and_line(text: str, expected: bool) -> None:
    assert present("path_line", "json/decoder.py:42", text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("There are 1,024 matches.", True), ("1024.0", True), ("10245", False), ("1.024", False)],
)
def test_numbers_by_value(text: str, expected: bool) -> None:
    assert present("number", "1024", text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("version 1.2", True), ("v1.2 it is", True), ("1.2.3", False), ("11.2", False)],
)
def test_versions_are_not_prefixes(text: str, expected: bool) -> None:
    assert present("version", "1.2", text) is expected


def test_abbreviated_hash_matches_a_longer_one_but_not_another() -> None:
    assert present("name", "3cf6fab", "commit 3cf6fab1e2d0 by Ann")
    assert present("name", "3cf6fab", "commit 3CF6FAB.")
    assert not present("name", "3cf6fab", "commit 3cf6fa")
    assert not present("name", "3cf6fab", "commit a3cf6fab")


def test_names_and_tests_need_whole_words() -> None:
    assert present("test", "test_parse_float", "test_parse_float failed")
    assert not present("test", "test_parse", "test_parse_float failed")
    assert present("name", "requests", "The package is Requests.")


def test_a_path_line_fact_must_be_path_colon_line() -> None:
    with pytest.raises(ValueError, match="path:line"):
        present("path_line", "no-line", "no-line")

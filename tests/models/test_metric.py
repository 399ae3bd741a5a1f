"""The reference metric: deterministic, 0-100, rewards the reference's facts."""

from __future__ import annotations

import pytest

from tokenlens.metric import score

REFERENCE = "Alice paid invoice 4417 on March 3 by bank transfer."


def test_identical_answer_scores_100_and_empty_scores_0() -> None:
    assert score(REFERENCE, REFERENCE) == 100.0
    assert score("", REFERENCE) == 0.0
    assert score("   ", REFERENCE) == 0.0


def test_score_is_deterministic_and_in_range() -> None:
    answers = ["Alice paid on March 3.", "Bob paid.", "4417", "The weather is nice today."]
    first = [score(a, REFERENCE) for a in answers]
    assert first == [score(a, REFERENCE) for a in answers]
    assert all(0.0 <= s <= 100.0 for s in first)


def test_more_reference_facts_score_higher() -> None:
    full = "Invoice 4417 was paid by Alice on March 3, by bank transfer."
    partial = "Invoice 4417 was paid by Alice."
    wrong = "Invoice 5120 was paid by Bob in June."
    assert score(full, REFERENCE) > score(partial, REFERENCE) > score(wrong, REFERENCE)


def test_numbers_match_by_value_exactly() -> None:
    assert score("The total is 1,200 dollars.", "1200") == 100.0
    assert score("The total is 1200.0", "1,200") == 100.0
    assert score("The total is 1201", "1200") == 0.0
    assert score("It is 42.", "The answer is 41") == 0.0


def test_case_plurals_and_stopwords_do_not_matter() -> None:
    assert score("THE INVOICES", "invoice") == 100.0


def test_padding_costs_a_little_but_recall_dominates() -> None:
    short = "Alice paid on March 3 by bank transfer, invoice 4417."
    padded = short + " " + " ".join(f"filler{i}" for i in range(30))
    assert score(padded, REFERENCE) < score(short, REFERENCE)
    # Recall-weighted: the padded answer with every fact still beats a terse half answer.
    assert score(padded, REFERENCE) > score("Alice paid.", REFERENCE)


@pytest.mark.parametrize("answer", ["I don't know.", "The context does not say."])
def test_non_answers_score_low(answer: str) -> None:
    assert score(answer, REFERENCE) < 20

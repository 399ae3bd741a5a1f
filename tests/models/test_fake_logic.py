"""The loopback server's "model" and "judge" behave like ones for our purpose."""

from __future__ import annotations

import random

from tokenlens.metric import score
from tokenlens.tasks import CalibrationTask
from tokenlens.testing.fake_logic import (
    NOT_FOUND_ANSWER,
    conform,
    fake_answer,
    fake_judge,
    input_tokens,
    split_prompt,
    structured_reply,
)

CONTEXT = (
    "The Lisbon office opened in 2019 and has 40 staff. "
    "Invoice 4417 was paid by Alice on March 3 by bank transfer. "
    "The cafeteria serves lunch from noon. "
    "Parking permits are renewed every January. "
    "The quarterly review is held in the large meeting room."
)
TASK = CalibrationTask(
    id="t1",
    task_class="extraction",
    question="Who paid invoice 4417, and when?",
    context=CONTEXT,
    reference="Alice paid invoice 4417 on March 3.",
)


def body(context: str = CONTEXT, temperature: float = 1.0) -> dict:
    task = TASK.model_copy(update={"context": context})
    return {**task.to_request(model="claude-haiku-4-5"), "temperature": temperature}


def test_question_and_context_come_from_the_last_user_blocks() -> None:
    question, context = split_prompt(body())
    assert question == TASK.question
    assert context == [CONTEXT]


def test_single_string_prompt_uses_last_paragraph_as_question() -> None:
    question, context = split_prompt(
        {"messages": [{"role": "user", "content": "Fact one.\n\nFact two.\n\nWhat is it?"}]}
    )
    assert question == "What is it?"
    assert context == ["Fact one.", "Fact two."]


def test_answer_contains_the_relevant_sentence() -> None:
    answer = fake_answer(body(temperature=0.0), random.Random(0))
    assert "Invoice 4417 was paid by Alice on March 3" in answer
    assert "cafeteria" not in answer


def test_deleting_the_needed_fact_lowers_the_grade() -> None:
    damaged = CONTEXT.replace("Invoice 4417 was paid by Alice on March 3 by bank transfer. ", "")
    full = [score(fake_answer(body(), random.Random(i)), TASK.reference) for i in range(20)]
    cut = [score(fake_answer(body(damaged), random.Random(i)), TASK.reference) for i in range(20)]
    assert sum(cut) / len(cut) < 0.5 * sum(full) / len(full)


def test_no_overlap_gives_a_not_found_answer() -> None:
    assert fake_answer(body("Nothing relevant here at all."), random.Random(0)) == NOT_FOUND_ANSWER


def test_temperature_zero_is_deterministic_and_positive_temperature_varies() -> None:
    greedy = {fake_answer(body(temperature=0.0), random.Random(i)) for i in range(10)}
    sampled = {fake_answer(body(temperature=1.0), random.Random(i)) for i in range(30)}
    assert len(greedy) == 1
    assert len(sampled) > 1


def test_judge_grades_by_agreement_with_reference() -> None:
    sections = {
        "request": TASK.question,
        "reference": TASK.reference,
        "answer_a": "Alice paid invoice 4417 on March 3.",
        "answer_b": "The cafeteria serves lunch from noon.",
    }
    verdict = fake_judge(sections, random.Random(0), noise=4.0)
    assert list(verdict) == ["reasoning", "grade_a", "grade_b", "note"]
    assert verdict["grade_a"] > 85 > 20 > verdict["grade_b"]
    assert all(isinstance(verdict[k], int) for k in ("grade_a", "grade_b"))
    noisy = {fake_judge(sections, random.Random(i), noise=4.0)["grade_a"] for i in range(20)}
    assert len(noisy) > 1  # seeded noise, not a constant


def test_structured_reply_without_judge_tags_follows_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "n": {"type": "integer"},
            "ok": {"type": "boolean"},
        },
        "required": ["name", "n", "ok"],
        "additionalProperties": False,
    }
    request = {
        "messages": [{"role": "user", "content": "extract"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    assert structured_reply(request, random.Random(0), 4.0) == {"name": "", "n": 0, "ok": False}
    assert conform({"extra": 1, "n": 3}, schema) == {"name": "", "n": 3, "ok": False}


def test_input_tokens_grow_with_the_prompt() -> None:
    assert input_tokens(body(CONTEXT + " More words here." * 20)) > input_tokens(body()) > 20

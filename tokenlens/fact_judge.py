"""The fact grader: an answer's grade is the share of its task's exact facts it states.

Agent tasks carry facts read by code from the tool output (`tokenlens.facts`): a file and
line, a version, a count, a commit. Whether an answer states them needs no model, so the
grade is deterministic — two greedy answers that are equal get equal grades, and the
grader adds no noise of its own. It sits behind the same `Judge` protocol as the LLM judge
and the reference metric; it never sees which answer was compressed, and reads neither
the request nor the reference.

Which grader grades what (`tokenlens.calibration.judging.Grader`): without an API key the
no-key slot ("metric", the one that decides) grades a task with facts by its facts and any
other task by the reference metric; with a key the LLM judge grades every task and this
grader grades the tasks with facts beside it, under its own name, `facts`. A graded row's
note starts with the grader that gave it ("facts 2/3 vs 1/3", "metric 80 vs 75"), and the
report names the grader of each class.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenlens.errors import JudgeError
from tokenlens.facts import Fact, facts_present
from tokenlens.judge import PairGrade, Position

#: The fact grader's name in the grades table (when it grades beside an LLM judge).
FACTS = "facts"
#: What a fact-graded pair's note starts with ("facts 2/3 vs 1/3"): how a grades row tells
#: the fact grader's grade from the metric's (`tokenlens.competence`).
FACTS_NOTE_PREFIX = "facts "


def fact_grade(facts: Sequence[Fact], answer: str) -> tuple[float, int]:
    """(grade 0-100, facts stated) of one answer."""
    found = sum(facts_present(facts, answer))
    return round(100.0 * found / len(facts), 2), found


class FactJudge:
    """Grades a pair of answers to one task by the share of its facts each states."""

    name = FACTS

    def __init__(self, facts: Sequence[Fact]) -> None:
        if not facts:
            raise JudgeError("the fact grader needs a task with facts")
        self.facts = tuple(facts)

    def grade_pair(
        self,
        *,
        case_key: str,
        original_request_text: str,
        reference: str,
        answer_clear: str,
        answer_comp: str,
        both_orders: bool = False,
    ) -> PairGrade:
        del case_key, original_request_text, reference, both_orders  # facts only
        clear, n_clear = fact_grade(self.facts, answer_clear)
        comp, n_comp = fact_grade(self.facts, answer_comp)
        n = len(self.facts)
        return PairGrade(
            judge=self.name,
            grade_clear=clear,
            grade_comp=comp,
            reasoning="share of the task's exact facts each answer states",
            note=f"{FACTS_NOTE_PREFIX}{n_clear}/{n} vs {n_comp}/{n}",
            positions=(Position(clear_is_b=False, grade_a=clear, grade_b=comp),),
        )

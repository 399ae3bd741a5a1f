"""The fact grader: share of facts stated, deterministic, blind, and who grades what."""

from __future__ import annotations

import pytest

from tokenlens.calibration.cells import PairCell
from tokenlens.calibration.judging import Grader, grade_jobs, grader_lines
from tokenlens.config import CalibrationConfig
from tokenlens.errors import JudgeError
from tokenlens.fact_judge import FACTS, FactJudge
from tokenlens.facts import Fact
from tokenlens.judge import MetricJudge
from tokenlens.tasks import CalibrationTask

FACTS_OF = (Fact(kind="path_line", value="json/decoder.py:42"), Fact(kind="number", value="1024"))
BODY = {"messages": [{"role": "user", "content": "Where?"}]}
AGENT = CalibrationTask(
    id="agent-1",
    task_class="agent-search",
    reference="`json/decoder.py`, line 42; 1,024 bytes.",
    body=BODY,
    facts=FACTS_OF,
    context="json/decoder.py:42:x",
    question="Where?",
)
PLAIN = CalibrationTask(
    id="plain-1", task_class="extraction", question="Who?", context="Ann paid.", reference="Ann"
)


def grade(
    judge: FactJudge, clear: str, comp: str, key: str = "agent-1:prune@0.6:0"
) -> tuple[float, float, str]:
    g = judge.grade_pair(
        case_key=key,
        original_request_text="",
        reference="",
        answer_clear=clear,
        answer_comp=comp,
    )
    return g.grade_clear, g.grade_comp, g.note


def test_the_grade_is_the_share_of_facts_stated() -> None:
    judge = FactJudge(FACTS_OF)
    clear, comp, note = grade(judge, "Line 42 of ./json/decoder.py, size 1,024.", "json/decoder.py")
    assert (clear, comp) == (100.0, 0.0)  # the path alone is not the path and line
    assert note == "facts 2/2 vs 0/2"
    assert grade(judge, "1024 bytes", "json/decoder.py:42 (1024)")[:2] == (50.0, 100.0)


def test_equal_answers_grade_equal_in_either_position() -> None:
    judge = FactJudge(FACTS_OF)
    answer = "json/decoder.py:42"
    for key in ("agent-1:control:0", "agent-1:control:1", "agent-1:prune@0.6:3"):
        clear, comp, _ = grade(judge, answer, answer, key)
        assert clear == comp == 50.0


def test_a_task_without_facts_is_refused() -> None:
    with pytest.raises(JudgeError, match="needs a task with facts"):
        FactJudge(())


def config(judge: str) -> CalibrationConfig:
    return CalibrationConfig(judge=judge, methods=("safe",), rates=(0.6,), repeats=1)  # type: ignore[arg-type]


def answers(text_clear: str, text_comp: str) -> tuple[dict[str, object], dict[str, object]]:
    return ({"text": text_clear, "error": None}, {"text": text_comp, "error": None})


def test_without_a_key_the_metric_slot_grades_fact_tasks_by_their_facts() -> None:
    grader = Grader(config("metric"), "m", {"metric": MetricJudge()}, [AGENT, PLAIN], [])
    first, second = answers("json/decoder.py line 42, 1024", "nothing")
    row = grader.grade(("metric", 0, PairCell("agent-1", "control", 0)), first, second)  # type: ignore[arg-type]
    assert (row["judge"], row["grade_clear"], row["grade_comp"]) == ("metric", 100.0, 0.0)
    assert row["note"] is not None and row["note"].startswith("facts ")
    first, second = answers("Ann", "Ann")
    row = grader.grade(("metric", 0, PairCell("plain-1", "control", 0)), first, second)  # type: ignore[arg-type]
    assert row["note"] is not None and row["note"].startswith("metric ")


def test_with_a_key_the_fact_grader_grades_fact_tasks_beside_the_llm_judge() -> None:
    tasks = [AGENT, PLAIN]
    jobs = grade_jobs(config("llm"), ["claude-x"], tasks, ["safe"])
    by_judge = {(j, p.task_id) for j, _, p in jobs}
    assert (FACTS, "agent-1") in by_judge and (FACTS, "plain-1") not in by_judge
    assert ("claude-x", "agent-1") in by_judge and ("claude-x", "plain-1") in by_judge
    assert not any(
        j == FACTS for j, _, _ in grade_jobs(config("metric"), ["metric"], tasks, ["safe"])
    )
    grader = Grader(config("llm"), "m", {}, tasks, [])
    first, second = answers("1024", "json/decoder.py:42 and 1024")
    row = grader.grade((FACTS, 0, PairCell("agent-1", "safe", 0)), first, second)  # type: ignore[arg-type]
    assert (row["judge"], row["grade_clear"], row["grade_comp"]) == (FACTS, 50.0, 100.0)


def test_the_report_lines_name_the_grader_of_each_class() -> None:
    (line,) = grader_lines(config("metric"), "m", [AGENT, PLAIN])
    assert "fact grader" in line and "agent-search" in line and "metric graded extraction" in line
    (line,) = grader_lines(config("llm"), "claude-x", [AGENT, PLAIN])
    assert "LLM judge claude-x" in line and "judge `facts`" in line
    assert grader_lines(config("metric"), "m", [PLAIN]) == []

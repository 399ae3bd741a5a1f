"""The judges of a run, and the grading of one (baseline, second answer) pair."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tokenlens.calibration.cells import PairCell, pair_cells
from tokenlens.calibration.stage_load import request_tokens
from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.config import CalibrationConfig
from tokenlens.fact_judge import FACTS, FactJudge
from tokenlens.ledger import Ledger, LedgerClient, SpendMeter
from tokenlens.models.base import ModelClient
from tokenlens.tables import AnswerRow, CompressionRow, GradeRow
from tokenlens.tasks import CalibrationTask

if TYPE_CHECKING:
    from tokenlens.judge import Judge, PairGrade

#: One judgement to make: (judge name, pass (1: the --judge-twice repeat), pair).
GradeJob = tuple[str, int, PairCell]


def judge_salt(again: bool = False) -> str:
    """The ledger salt of LLM judge calls: the judge prompt's version (and the second pass
    of `--judge-twice`), so a new prompt never replays an old verdict."""
    from tokenlens.judge import JUDGE_PROMPT_VERSION

    salt = f"judge-prompt:{JUDGE_PROMPT_VERSION}"
    return salt + "|pass:1" if again else salt


class LedgerJudge:
    """A judge whose calls go through the ledger, salted with the judge prompt version.

    `again` is the same judge with a second salt, for --judge-twice: the repeated
    judgement of a control pair is a distinct call, never the cached first one.
    """

    def __init__(self, make: Callable[[str], Judge], salt: str):
        self._make = make
        self._salt = salt
        self._judge = make(salt)
        self.name = self._judge.name
        self.again = make(salt + "|pass:1")

    def grade_pair(self, **kwargs: Any) -> PairGrade:
        return self._judge.grade_pair(**kwargs)


def build_judges(
    config: CalibrationConfig,
    *,
    answer_client: ModelClient,
    model: str,
    ledger: Ledger,
    spend: SpendMeter,
    on_call: Callable[[bool, Any], None] | None = None,
) -> dict[str, Judge]:
    """The judges a run uses, by name; LLM judge calls go through the ledger."""
    from tokenlens.judge import LLMJudge, MetricJudge

    judges: dict[str, Judge] = {}
    if config.judge in ("metric", "both"):
        judges["metric"] = MetricJudge()
    if config.judge in ("llm", "both"):
        judge_model = config.judge_model or model
        inner = answer_client

        def make(salt: str) -> LLMJudge:
            client = LedgerClient(
                inner, ledger, kind="judge", salt=salt, spend=spend, on_call=on_call
            )
            return LLMJudge(client, judge_model)

        llm = LedgerJudge(make, judge_salt())
        judges[llm.name] = llm
    return judges


def grade_jobs(
    config: CalibrationConfig,
    judges: list[str],
    tasks: list[CalibrationTask],
    arm_keys: list[str],
) -> list[GradeJob]:
    """Every judgement of the run, in the grades table's order."""
    pairs = pair_cells([t.id for t in tasks], [CONTROL, *arm_keys], config.repeats)
    jobs: list[GradeJob] = []
    for judge_name in judges:
        for pair in pairs:
            jobs.append((judge_name, 0, pair))
            if config.judge_twice and pair.arm == CONTROL and judge_name != "metric":
                jobs.append((judge_name, 1, pair))
    if config.judge == "llm":  # the fact grader beside the LLM judge, on tasks with facts
        with_facts = {t.id for t in tasks if t.facts}
        jobs += [(FACTS, 0, pair) for pair in pairs if pair.task_id in with_facts]
    return jobs


def grader_lines(config: CalibrationConfig, model: str, tasks: list[CalibrationTask]) -> list[str]:
    """Which grader graded which classes, for the report."""
    with_facts = sorted({t.task_class for t in tasks if t.facts})
    without = sorted({t.task_class for t in tasks if not t.facts})
    if not with_facts:
        return []
    facts = "the fact grader (share of the exact answer facts an answer states)"
    if config.judge == "llm":
        judge = config.judge_model or model
        return [
            f"Graders: the LLM judge {judge} graded and decided every class; {facts} "
            f"also graded {', '.join(with_facts)} (judge `facts` in the grades table)."
        ]
    lines = [f"Graders: {facts} graded {', '.join(with_facts)}"]
    if without:
        lines[0] += f"; the reference metric graded {', '.join(without)}"
    lines[0] += " (judge `metric` in the grades table; each row's note names its grader)."
    if config.judge == "both":
        lines.append(f"The LLM judge {config.judge_model or model} graded every class beside them.")
    return lines


class Grader:
    """Grades pairs of one run: the rows' fixed columns, then the judge's verdict."""

    def __init__(
        self,
        config: CalibrationConfig,
        model: str,
        judges: dict[str, Judge],
        tasks: list[CalibrationTask],
        compressions: list[CompressionRow],
    ):
        self._config = config
        self._judges = judges
        self._tasks = {t.id: t for t in tasks}
        #: The tasks with facts: graded by them in the "metric" slot, and as `facts` beside
        #: an LLM judge.
        self._facts = {t.id: FactJudge(t.facts) for t in tasks if t.facts}
        self._comp: dict[tuple[str, str], CompressionRow] = {}
        self.know(compressions)
        from tokenlens.judge import render_request_text

        originals = {t.id: t.to_request(model=model, max_tokens=config.max_tokens) for t in tasks}
        self._request_text = {tid: render_request_text(b) for tid, b in originals.items()}
        self._clear_tokens = {tid: request_tokens(b) for tid, b in originals.items()}

    def know(self, compressions: list[CompressionRow]) -> None:
        """Take the arms' compressions (a pay stage that started before they existed)."""
        self._comp.update(((r["task_id"], r["arm"]), r) for r in compressions)

    def base_row(self, job: GradeJob) -> GradeRow:
        """The job's row before grading (no grades, no error)."""
        judge_name, judge_pass, pair = job
        task = self._tasks[pair.task_id]
        arm = Arm.parse(pair.arm)
        c = self._comp.get((pair.task_id, pair.arm))
        tokens = self._clear_tokens[pair.task_id]
        return {
            "task_id": task.id,
            "task_class": task.task_class,
            "arm": pair.arm,
            "method": arm.method,
            "rate": arm.rate,
            "replicate": pair.replicate,
            "judge": judge_name,
            "grade_clear": None,
            "grade_comp": None,
            "reduction": 0.0 if pair.arm == CONTROL else (c["reduction"] if c else None),
            "tokens_clear": (c["original_tokens"] if c else None) or tokens,
            "tokens_comp": (
                tokens if pair.arm == CONTROL else (c["compressed_tokens"] if c else None)
            ),
            "note": None,
            "error": None,
            "judge_pass": judge_pass,
            "fabricated_lines": c.get("fabricated_lines") if c and pair.arm != CONTROL else None,
            "unmarked_drops": c.get("unmarked_drops") if c and pair.arm != CONTROL else None,
            "facts_lost": c.get("facts_lost") if c and pair.arm != CONTROL else None,
        }

    def grade(self, job: GradeJob, first: AnswerRow | None, second: AnswerRow | None) -> GradeRow:
        """Grade the pair of `job` given its baseline and second answer rows."""
        judge_name, judge_pass, pair = job
        row = self.base_row(job)
        problem = answer_problem("cleartext answer", first) or answer_problem(
            "second answer" if pair.arm == CONTROL else "compressed answer", second
        )
        if problem:
            row["error"] = problem
            return row
        assert first is not None and second is not None
        assert first["text"] is not None and second["text"] is not None  # no error: a text
        if judge_name in (FACTS, "metric") and pair.task_id in self._facts:
            judge: Judge = self._facts[pair.task_id]
        else:
            judge = self._judges[judge_name]
        if judge_pass:
            assert isinstance(judge, LedgerJudge)  # judged twice: LLM judges only
            judge = judge.again
        result = judge.grade_pair(
            case_key=pair.case_key,
            original_request_text=self._request_text[pair.task_id],
            reference=self._tasks[pair.task_id].reference,
            answer_clear=first["text"],
            answer_comp=second["text"],
            both_orders=self._config.judge_both_orders,
        )
        row.update(
            {
                "grade_clear": result.grade_clear,
                "grade_comp": result.grade_comp,
                "note": result.note,
            }
        )
        return row


def answer_problem(what: str, row: AnswerRow | None) -> str | None:
    if row is None:
        return f"{what} missing"
    if row["error"]:
        return f"{what} failed: {row['error']}"
    return None

"""What a run will call and cost, before it calls anything: one function for the dry run,
the flow's estimate line and the spend line, so the three say the same thing.

Answers are counted as the sample stage will ask them: one request per distinct ledger
key (an arm that leaves a body unchanged shares the control's answer), split into those
already in the ledger and new ones. LLM judge calls are exact where both answers of a
pair are already in the ledger (the judge request is then known and looked up too);
where an answer is still to come, its pair's judge calls are counted as new: an upper
bound. Money is an upper bound as well: every new answer at `max_tokens`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tokenlens.calibration.answers import answer_requests
from tokenlens.calibration.cells import pair_cells
from tokenlens.calibration.judging import judge_salt
from tokenlens.calibration.stage_compress import measured_arms
from tokenlens.calibration.stage_load import request_tokens
from tokenlens.compress.arms import CONTROL
from tokenlens.config import CalibrationConfig
from tokenlens.decision.reanswer import REANSWER_COUNT
from tokenlens.judge import build_judge_request, render_request_text, swap_for
from tokenlens.ledger import Ledger, LedgerView, call_key
from tokenlens.models.base import CompletionRequest
from tokenlens.pricing import cost_usd
from tokenlens.tables import CompressionRow
from tokenlens.tasks import CalibrationTask

#: Judge prompt overhead (system + instructions) and a generous judge reply, in tokens.
JUDGE_OVERHEAD_TOKENS = 450
JUDGE_REPLY_TOKENS = 350


@dataclass(frozen=True)
class CallPlan:
    """The calls a run needs, which of them the ledger already holds, and a price bound."""

    answer_calls: int
    cached_answer_calls: int
    judge_calls: int
    cached_judge_calls: int
    usd_upper: float | None  # None: no per-token price (local model, unknown model)
    #: The sequential design pays in rounds and stops once the verdicts settle: the counts
    #: are what the fixed design would pay, a bound.
    sequential: bool = False
    #: With re-answering (`--reanswer`): the answer calls it adds if every cell's repeats
    #: disagree (`REANSWER_COUNT` more replicates of everything), a bound not counted above.
    reanswer_answers: int = 0
    #: `--reanswer` asked for at one repeat, where no cell's repeats can disagree.
    reanswer_idle: bool = False

    @property
    def new_answer_calls(self) -> int:
        return self.answer_calls - self.cached_answer_calls

    @property
    def new_judge_calls(self) -> int:
        return self.judge_calls - self.cached_judge_calls

    @property
    def new_calls(self) -> int:
        return self.new_answer_calls + self.new_judge_calls

    def describe(self) -> str:
        """One line: `0 new calls, $0 (...)` when the ledger holds everything."""
        held = f"{self.cached_answer_calls} answer"
        if self.judge_calls:
            held += f" and {self.cached_judge_calls} judge"
        if self.new_calls == 0:
            return f"0 new calls, $0 ({held} calls already in the ledger){self._reanswer()}"
        judge = f", up to {self.new_judge_calls} new judge calls" if self.judge_calls else ""
        money = (
            "no per-token price (local model or unpriced)"
            if self.usd_upper is None
            else f"at most ${self.usd_upper:.4f} (every answer at max_tokens)"
        )
        bound, rounds = (
            ("up to ", "; the sequential design stops paying once the verdicts settle")
            if self.sequential
            else ("", "")
        )
        return (
            f"{bound}{self.new_answer_calls} new answer calls{judge} ({held} calls already "
            f"in the ledger); {money}{rounds}{self._reanswer()}"
        )

    def _reanswer(self) -> str:
        if self.reanswer_idle:
            return "; --reanswer pays nothing at 1 repeat (no repeats to disagree: --repeats 3)"
        if not self.reanswer_answers:
            return ""
        return (
            f"; re-answering adds {REANSWER_COUNT} answers, each judged, for each cell whose "
            f"repeats disagree: at most {self.reanswer_answers} more answer calls, not counted "
            "above"
        )


def plan_calls(
    config: CalibrationConfig,
    *,
    model: str,
    backend: str,
    tasks: list[CalibrationTask],
    compressions: list[CompressionRow],
    ledger: Ledger | LedgerView | None,
) -> CallPlan:
    """Count (and bound the price of) a run's answer and judge calls; see module docstring.

    `config.seed` is the run's sample seed; `ledger` None counts everything as new (a
    `LedgerView`: what the ledger held before the run started paying).
    """
    held: Callable[[str], bool] = (lambda key: key in ledger) if ledger else (lambda key: False)
    plan = answer_requests(config, model, tasks, compressions)
    keys = {cell: call_key(backend, request) for cell, request in plan.requests.items()}
    unique: dict[str, CompletionRequest] = {}
    for cell, request in plan.requests.items():
        unique.setdefault(keys[cell], request)
    new_answers = [r for k, r in unique.items() if not held(k)]
    batch = config.batch and backend == "anthropic"
    total: float | None = 0.0
    for request in new_answers:
        body = request.model_dump(mode="json", exclude_none=True)
        total = _add(total, request.model, request_tokens(body), request.max_tokens, batch)

    judge_calls = cached_judges = 0
    if config.judge in ("llm", "both"):
        judge_model = config.judge_model or model
        by_task = {t.id: t for t in tasks}
        originals = {t.id: t.to_request(model=model, max_tokens=config.max_tokens) for t in tasks}
        texts = {tid: render_request_text(body) for tid, body in originals.items()}
        orders = 2 if config.judge_both_orders else 1
        seen: set[str] = set()
        pairs = pair_cells(
            [t.id for t in tasks], [CONTROL, *measured_arms(config, compressions)], config.repeats
        )
        for pair in pairs:
            if pair.second in plan.blocked:
                continue  # the compressed answer cannot exist: the pair is an error row
            passes = 2 if config.judge_twice and pair.arm == CONTROL else 1
            # `peek`, not `get`: what the ledger loaded, with no storage I/O per key (on an
            # object store `get` looks again on every miss: a GET and a LIST).
            first = ledger.peek(keys[pair.baseline]) if ledger else None
            second = ledger.peek(keys[pair.second]) if ledger else None
            new = 0
            if first is None or second is None:  # an answer is still to come
                new = passes * orders
                judge_calls += new
            else:  # both answers known: so is every judge request of the pair
                case = pair.case_key
                for judge_pass in range(passes):
                    salt = judge_salt(again=judge_pass == 1)
                    for clear_is_b in (swap_for(case), not swap_for(case))[:orders]:
                        a, b = (
                            (second.text, first.text) if clear_is_b else (first.text, second.text)
                        )
                        request = build_judge_request(
                            texts[pair.task_id],
                            by_task[pair.task_id].reference,
                            a,
                            b,
                            model=judge_model,
                        )
                        key = call_key(backend, request, salt=salt)
                        if key in seen:
                            continue
                        seen.add(key)
                        judge_calls += 1
                        if held(key):
                            cached_judges += 1
                        else:
                            new += 1
            if new:
                judge_in = request_tokens(originals[pair.task_id]) + JUDGE_OVERHEAD_TOKENS
                judge_in += 2 * config.max_tokens
                for _ in range(new):
                    total = _add(total, judge_model, judge_in, JUDGE_REPLY_TOKENS, batch)
    if backend == "local":
        total = None
    return CallPlan(
        len(unique),
        len(unique) - len(new_answers),
        judge_calls,
        cached_judges,
        total,
        sequential=config.design == "sequential",
        # one repeat cannot disagree with itself: nothing to re-answer then
        reanswer_answers=-(-len(unique) * REANSWER_COUNT // config.repeats)
        if config.reanswer and config.repeats >= 2
        else 0,
        reanswer_idle=config.reanswer and config.repeats < 2,
    )


def _add(
    total: float | None, model: str, input_tokens: int, output_tokens: int, batch: bool
) -> float | None:
    if total is None:
        return None
    cost = cost_usd(model, input_tokens=input_tokens, output_tokens=output_tokens, batch=batch)
    return None if cost is None else total + cost

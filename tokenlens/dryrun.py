"""`tokenlens calibrate --dry-run`: what each arm does to each task, and what a real run costs.

No key and no model calls are needed. Token counts are offline estimates (see
`tokenlens.tokens.TOKENIZER_NOTE`); with an Anthropic key configured and the anthropic
backend chosen, the cleartext and compressed bodies are also counted exactly with the
free ``count_tokens`` endpoint. An arm that cannot run here (LLMLingua-2 without its
model) is listed as unavailable with the reason, and left out of the call plan.

The call plan follows the calibration's design: per task and replicate, one cleartext
answer, one second cleartext answer for the control arm, one answer per arm; with an LLM
judge, one judge call per arm pair plus one for the control pair (doubled when both A/B
orders are judged; control pairs judged again with ``judge_twice``). The reference-metric
judge makes no paid calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tokenlens.compress.arms import Arm, build_ladder
from tokenlens.compress.request import compress_request
from tokenlens.compress.settings import CompressSettings
from tokenlens.config import DEFAULT_ANTHROPIC_MODEL, CalibrationConfig
from tokenlens.errors import ArmUnavailable, TokenLensError
from tokenlens.pricing import PRICES_AS_OF, cost_usd
from tokenlens.tokens import TOKENIZER_NOTE

#: Assumed answer length when pricing a run (capped by the config's max_tokens).
ASSUMED_ANSWER_TOKENS = 300
#: Assumed judge verdict length (reasoning first, then the grade).
ASSUMED_JUDGE_OUTPUT_TOKENS = 250
#: Judge prompt overhead beyond the request, reference and two answers (rubric, schema).
JUDGE_PROMPT_OVERHEAD_TOKENS = 400
CLEARTEXT = "cleartext"

TokenCounter = Callable[[dict[str, Any]], int]


@dataclass(frozen=True)
class DryRunRow:
    """One task under one arm (or as cleartext)."""

    task_id: str
    task_class: str
    arm: str  # Arm.key, or "cleartext"
    label: str
    tokens: int | None
    reduction: float | None
    eligible_blocks: int | None
    total_blocks: int | None
    unavailable: str | None = None
    exact_tokens: int | None = None


@dataclass(frozen=True)
class CallPlan:
    """How many model calls a real run makes, and what they would cost."""

    answer_calls: int
    judge_calls: int
    model: str
    judge_model: str
    cost_usd: float | None
    cost_note: str

    @property
    def paid_calls(self) -> int:
        return self.answer_calls + self.judge_calls


def answer_model(config: CalibrationConfig) -> str:
    if config.model:
        return config.model
    return DEFAULT_ANTHROPIC_MODEL if config.resolved_backend() == "anthropic" else "local"


def dry_run_rows(
    config: CalibrationConfig,
    *,
    settings: CompressSettings | None = None,
    counter: TokenCounter | None = None,
) -> list[DryRunRow]:
    """Every task as cleartext and under every arm of the config's ladder, in task order."""
    settings = settings or CompressSettings(llmlingua_model=config.llmlingua_model)
    arms = build_ladder(config.methods, config.rates)
    model = answer_model(config)
    rows: list[DryRunRow] = []
    for task in config.selected_tasks():
        body = task.to_request(model=model, max_tokens=config.max_tokens)
        clear = compress_request(body, Arm("control"), settings=settings)
        rows.append(
            DryRunRow(
                task.id,
                task.task_class,
                CLEARTEXT,
                CLEARTEXT,
                clear.original_tokens,
                None,
                None,
                clear.total_blocks,
                exact_tokens=_count(counter, body),
            )
        )
        for arm in arms:
            try:
                result = compress_request(body, arm, settings=settings)
            except ArmUnavailable as exc:
                rows.append(
                    DryRunRow(
                        task.id,
                        task.task_class,
                        arm.key,
                        arm.label,
                        None,
                        None,
                        None,
                        None,
                        unavailable=str(exc),
                    )
                )
                continue
            rows.append(
                DryRunRow(
                    task.id,
                    task.task_class,
                    arm.key,
                    arm.label,
                    result.compressed_tokens,
                    result.reduction,
                    result.eligible_blocks,
                    result.total_blocks,
                    exact_tokens=_count(counter, result.body),
                )
            )
    return rows


def _count(counter: TokenCounter | None, body: dict[str, Any]) -> int | None:
    if counter is None:
        return None
    try:
        return counter(body)
    except TokenLensError:
        return None


def call_plan(config: CalibrationConfig, rows: Sequence[DryRunRow]) -> CallPlan:
    """Model calls (and their estimated cost) of a real run over `rows`' tasks and arms."""
    by_task: dict[str, list[DryRunRow]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    model = answer_model(config)
    judge_model = config.judge_model or model
    llm_judge = config.judge in ("llm", "both")
    orders = 2 if config.judge_both_orders else 1
    out_tokens = min(ASSUMED_ANSWER_TOKENS, config.max_tokens)
    answers = judges = 0
    cost: float | None = 0.0
    for task_rows in by_task.values():
        clear = next(r for r in task_rows if r.arm == CLEARTEXT)
        clear_tokens = _tokens(clear)
        arm_rows = [r for r in task_rows if r.arm != CLEARTEXT and r.unavailable is None]
        per_replicate_inputs = [clear_tokens, clear_tokens] + [_tokens(r) for r in arm_rows]
        answers += config.repeats * len(per_replicate_inputs)
        for tokens in per_replicate_inputs:
            cost = _add(cost, model, tokens, out_tokens, config, config.repeats)
        if llm_judge:
            pairs = len(arm_rows) + 1 + (1 if config.judge_twice else 0)
            n = config.repeats * pairs * orders
            judges += n
            judge_in = clear_tokens + 2 * out_tokens + JUDGE_PROMPT_OVERHEAD_TOKENS
            cost = _add(cost, judge_model, judge_in, ASSUMED_JUDGE_OUTPUT_TOKENS, config, n)
    return CallPlan(answers, judges, model, judge_model, cost, _cost_note(config, model, cost))


def _tokens(row: DryRunRow) -> int:
    return row.exact_tokens if row.exact_tokens is not None else int(row.tokens or 0)


def _add(
    total: float | None, model: str, tokens: int, out: int, config: CalibrationConfig, n: int
) -> float | None:
    if total is None or model == "local" or config.resolved_backend() == "local":
        return total
    one = cost_usd(model, input_tokens=tokens, output_tokens=out, batch=config.batch)
    return None if one is None else total + one * n


def _cost_note(config: CalibrationConfig, model: str, cost: float | None) -> str:
    if config.resolved_backend() == "local":
        return "local model: $0" if model == "local" else f"local model ({model}): $0"
    if cost is None:
        return f"no price known for {model} (pricing table of {PRICES_AS_OF})"
    judge = (
        "the metric judge adds no paid calls"
        if config.judge == "metric"
        else f"judge calls assume {ASSUMED_JUDGE_OUTPUT_TOKENS} output tokens"
    )
    return (
        f"${cost:.2f} at {model} prices of {PRICES_AS_OF}"
        f"{' (batch: half price)' if config.batch else ''}; assumes "
        f"{min(ASSUMED_ANSWER_TOKENS, config.max_tokens)} output tokens per answer, no prompt "
        f"caching; {judge}"
    )


def arm_totals(rows: Sequence[DryRunRow]) -> list[tuple[str, str, int | None, float | None, str]]:
    """Per arm: key, label, total tokens, reduction vs cleartext, and an unavailable reason."""
    clear_total = sum(_tokens(r) for r in rows if r.arm == CLEARTEXT)
    order: dict[str, DryRunRow] = {}
    for row in rows:
        order.setdefault(row.arm, row)
    totals: list[tuple[str, str, int | None, float | None, str]] = []
    for key, first in order.items():
        mine = [r for r in rows if r.arm == key]
        reason = next((r.unavailable for r in mine if r.unavailable), None)
        if reason is not None:
            totals.append((key, first.label, None, None, f"unavailable: {reason}"))
            continue
        total = sum(_tokens(r) for r in mine)
        reduction = None if key == CLEARTEXT or not clear_total else 1 - total / clear_total
        totals.append((key, first.label, total, reduction, ""))
    return totals


def exact_counter(config: CalibrationConfig) -> TokenCounter | None:
    """Exact counts via Anthropic's count_tokens when a key is set and the backend is anthropic."""
    if config.resolved_backend() != "anthropic" or not os.environ.get("ANTHROPIC_API_KEY"):
        return None
    from tokenlens.models.anthropic_backend import AnthropicClient

    client = AnthropicClient(answer_model(config))
    return client.count_tokens


def run_dry_run(config: CalibrationConfig) -> int:
    """Print the dry run's table, per-arm totals and call plan; 0 on success."""
    counter = exact_counter(config)
    rows = dry_run_rows(config, counter=counter)
    print(f"Dry run: no model calls. Tokens: {TOKENIZER_NOTE}.")
    if counter is not None:
        print("Exact column: Anthropic count_tokens for the answer model.")
    print()
    print(format_rows(rows, exact=counter is not None))
    print()
    print("Per-arm totals")
    for _key, label, total, reduction, note in arm_totals(rows):
        if note:
            print(f"  {label:<20} {'unavailable':>9} (reason below)")
        else:
            red = "—" if reduction is None else f"{reduction * 100:5.1f}%"
            print(f"  {label:<20} {total:>9,} tokens  {red}")
    plan = call_plan(config, rows)
    tasks = len({row.task_id for row in rows})
    skipped = sorted({row.label for row in rows if row.unavailable})
    print()
    print(
        f"A real run: {tasks} tasks x {config.repeats} repeats -> "
        f"{plan.answer_calls:,} answer calls ({plan.model}), "
        f"{plan.judge_calls:,} judge calls ({config.judge} judge"
        f"{', both orders' if config.judge_both_orders else ''})."
    )
    if skipped:
        print(f"  Not counted (unavailable here): {', '.join(skipped)}.")
        for reason in sorted({row.unavailable for row in rows if row.unavailable}):
            print(f"  Unavailable because: {reason}")
    print(f"  Estimated cost: {plan.cost_note}.")
    print()
    for line in design_power_lines(config, rows):
        print(line)
    return 0


def design_power_lines(config: CalibrationConfig, rows: Sequence[DryRunRow]) -> list[str]:
    """What this design can certify, per class: the planner's reading of tasks x repeats.

    Uses the planner's stated spread assumptions (a finished run's measured spreads give
    sharper figures: `tokenlens plan`)."""
    from tokenlens.decision import tasks_for_measured, tasks_for_provisional
    from tokenlens.decision.planner import ASSUMED_SPREAD, detectable_retention

    per_class: dict[str, set[str]] = {}
    for row in rows:
        per_class.setdefault(row.task_class, set()).add(row.task_id)
    tol = config.tolerance
    need, need_m = tasks_for_provisional(tol), tasks_for_measured(tol)
    between, within = 100 * ASSUMED_SPREAD.between, 100 * (ASSUMED_SPREAD.within or 0.0)
    lines = [
        f"What this design can certify at a {tol:.0%} tolerance (mode {config.mode}; "
        f"a ? needs >= {need} tasks per class, a ✓ >= {need_m}; assumed spread between "
        f"tasks {between:.0f} points, within {within:.0f}):"
    ]
    for name, tasks in sorted(per_class.items()):
        n = len(tasks)
        reach = detectable_retention(tol, n, config.repeats)
        if config.mode == "mean":
            text = "mean mode (the seed's rule) has no error guarantee to plan for"
        elif reach is None:
            text = f"nothing — {n} tasks is below the {need} the evidence rule needs"
        elif reach > 1.0:
            text = "nothing reliably — even a lossless arm is held < 80 % of the time"
        else:
            text = f"an arm only if its true retention is >= {reach:.1%} (80 % power)"
        lines.append(f"  {name:<24} {n:>3} tasks x {config.repeats}: {text}")
    lines.append("  `tokenlens plan` sizes a design from a finished calibration's own spreads.")
    return lines


def format_rows(rows: Sequence[DryRunRow], *, exact: bool = False) -> str:
    """The per-task table as aligned plain text (task and class shown once per task)."""
    header = f"{'task':<24} {'class':<22} {'arm':<18} {'est. tokens':>11} {'reduction':>9} blocks"
    if exact:
        header += "  exact"
    lines = [header, "-" * len(header)]
    last_task = None
    for row in rows:
        task = row.task_id if row.task_id != last_task else ""
        klass = row.task_class if row.task_id != last_task else ""
        last_task = row.task_id
        if row.unavailable:
            lines.append(f"{task:<24} {klass:<22} {row.label:<18} {'unavailable':>11}")
            continue
        red = "—" if row.reduction is None else f"{row.reduction * 100:.1f}%"
        blocks = "—" if row.eligible_blocks is None else f"{row.eligible_blocks}/{row.total_blocks}"
        line = f"{task:<24} {klass:<22} {row.label:<18} {row.tokens:>11,} {red:>9} {blocks}"
        if exact:
            line += f"  {row.exact_tokens if row.exact_tokens is not None else '—'}"
        lines.append(line)
    return "\n".join(lines)

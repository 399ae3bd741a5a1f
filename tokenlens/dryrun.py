"""`tokenlens calibrate --dry-run`: what each arm does to each task, and what a real run costs.

No key and no model calls are needed. Token counts are offline estimates (see
`tokenlens.tokens.TOKENIZER_NOTE`); with an Anthropic key configured and the anthropic
backend chosen, the cleartext and compressed bodies are also counted exactly with the
free ``count_tokens`` endpoint, `COUNT_CONCURRENCY` calls at a time with a progress line
on stderr (one at a time, ~200 bodies took ~50 s). An arm that cannot run here
(LLMLingua-2 without its model) is listed as unavailable with the reason, and left out of
the call plan.

The call plan is the calibration's own (`tokenlens.calibration.estimate.plan_calls`, the
same function behind the flow's estimate and spend lines): distinct answer requests of
the sample a plain run draws, with what the ledger under `--store` already holds, and the
LLM judge calls (an upper bound until the answers exist). The reference-metric judge
makes no paid calls.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from tokenlens.calibration.context import run_ladder
from tokenlens.calibration.estimate import CallPlan
from tokenlens.compress.arms import Arm
from tokenlens.compress.request import compress_request
from tokenlens.compress.settings import CompressSettings
from tokenlens.config import DEFAULT_ANTHROPIC_MODEL, CalibrationConfig
from tokenlens.errors import ArmUnavailable, TokenLensError
from tokenlens.ledger import Ledger
from tokenlens.pricing import PRICES_AS_OF
from tokenlens.storage import location
from tokenlens.tables import CompressionRow
from tokenlens.tokens import TOKENIZER_NOTE

CLEARTEXT = "cleartext"
#: Exact counts in flight at least (count_tokens is free and rate-limited on its own).
COUNT_CONCURRENCY = 8

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
    body_json: str | None = None  # the compressed body (arms only), for the call plan


def answer_model(config: CalibrationConfig) -> str:
    if config.model:
        return config.model
    return DEFAULT_ANTHROPIC_MODEL if config.resolved_backend() == "anthropic" else "local"


def dry_run_rows(
    config: CalibrationConfig,
    *,
    settings: CompressSettings | None = None,
    counter: TokenCounter | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[DryRunRow]:
    """Every task as cleartext and under every arm of the config's ladder, in task order.

    With a `counter`, every body is then counted exactly, `count_concurrency(config)` at a
    time (`progress(done, total)` after each)."""
    settings = settings or CompressSettings(llmlingua_model=config.llmlingua_model)
    arms = run_ladder(config)
    model = answer_model(config)
    rows: list[DryRunRow] = []
    bodies: list[dict[str, Any] | None] = []  # per row, what count_tokens is asked about
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
            )
        )
        bodies.append(body)
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
                bodies.append(None)
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
                    body_json=json.dumps(result.body, sort_keys=True),
                )
            )
            bodies.append(result.body)
    if counter is None:
        return rows
    exact = count_exactly(counter, bodies, concurrency=count_concurrency(config), progress=progress)
    return [replace(row, exact_tokens=tokens) for row, tokens in zip(rows, exact, strict=True)]


def count_concurrency(config: CalibrationConfig) -> int:
    """count_tokens calls in flight: `--concurrency`, at least `COUNT_CONCURRENCY`."""
    return max(config.concurrency, COUNT_CONCURRENCY)


def count_exactly(
    counter: TokenCounter,
    bodies: Sequence[dict[str, Any] | None],
    *,
    concurrency: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[int | None]:
    """Exact counts of `bodies` (None stays None; a failed count is None), `concurrency`
    at a time: ~200 bodies one after another took ~50 s of round trips."""
    todo = [i for i, body in enumerate(bodies) if body is not None]
    found: list[int | None] = [None] * len(bodies)

    def one(index: int) -> tuple[int, int | None]:
        body = bodies[index]
        assert body is not None
        try:
            return index, counter(body)
        except TokenLensError:
            return index, None

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="count") as pool:
        for done, (index, tokens) in enumerate(pool.map(one, todo), start=1):
            found[index] = tokens
            if progress is not None:
                progress(done, len(todo))
    return found


def call_plan(config: CalibrationConfig, rows: Sequence[DryRunRow]) -> CallPlan:
    """The calls (and price bound) of a plain run over `rows`' tasks and arms, counting
    what the ledger under `config.store` already holds (see module docstring)."""
    from tokenlens.calibration.estimate import plan_calls

    compressions: list[CompressionRow] = [
        {
            "task_id": r.task_id,
            "task_class": r.task_class,
            "arm": r.arm,
            "method": Arm.parse(r.arm).method,
            "rate": Arm.parse(r.arm).rate,
            "status": "unavailable" if r.unavailable else "ok",
            "reason": r.unavailable,
            "cache_key": "",  # the plan reads arm, status, reason and body only
            "body_json": r.body_json,
            "original_tokens": None,
            "compressed_tokens": r.tokens,
            "reduction": r.reduction,
            "eligible_blocks": r.eligible_blocks,
            "total_blocks": r.total_blocks,
            "elapsed_ms": None,
            "fabricated_lines": None,
            "unmarked_drops": None,
            "facts_lost": None,
        }
        for r in rows
        if r.arm != CLEARTEXT
    ]
    ledger_dir = location(config.store).child("ledger")
    return plan_calls(
        config,
        model=run_model(config),
        backend=config.resolved_backend(),
        tasks=config.selected_tasks(),
        compressions=compressions,
        ledger=Ledger(ledger_dir) if ledger_dir.exists() else None,
    )


def run_model(config: CalibrationConfig) -> str:
    """The model id a real run asks (for the local backend, the GGUF's name)."""
    if config.resolved_backend() == "local":
        try:
            from tokenlens.models.local import model_name, resolve_model_path

            return model_name(resolve_model_path(config.model))
        except (TokenLensError, OSError):
            return answer_model(config)
    return answer_model(config)


def _tokens(row: DryRunRow) -> int:
    return row.exact_tokens if row.exact_tokens is not None else int(row.tokens or 0)


def cost_note(config: CalibrationConfig, plan: CallPlan) -> str:
    """The plan's money line, with what the bound assumes."""
    model = run_model(config)
    if config.resolved_backend() == "local":
        return f"local model ({model}): $0"
    if plan.usd_upper is None:
        return f"no price known for {model} (pricing table of {PRICES_AS_OF})"
    return (
        f"at most ${plan.usd_upper:.2f} for the {plan.new_calls:,} new calls at {model} prices "
        f"of {PRICES_AS_OF}{' (batch: half price)' if config.batch else ''}; every answer "
        "at max_tokens, no prompt caching"
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
    config = config.with_tool_rungs(config.selected_tasks())
    counter = exact_counter(config)
    if counter is not None:
        bodies = len(config.selected_tasks()) * (1 + len(run_ladder(config)))
        print(
            f"Counting up to {bodies} prompts exactly with Anthropic's count_tokens endpoint "
            f"(free, no model call; {count_concurrency(config)} at a time)...",
            file=sys.stderr,
        )
    rows = dry_run_rows(config, counter=counter, progress=_count_progress())
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
        f"{plan.answer_calls:,} answer calls ({run_model(config)}), "
        f"{plan.judge_calls:,} judge calls ({config.judge} judge"
        f"{', both orders' if config.judge_both_orders else ''}); "
        f"{plan.describe()}."
    )
    if skipped:
        print(f"  Not counted (unavailable here): {', '.join(skipped)}.")
        for reason in sorted({row.unavailable for row in rows if row.unavailable}):
            print(f"  Unavailable because: {reason}")
    print(f"  Estimated cost: {cost_note(config, plan)}.")
    print()
    for line in design_power_lines(config, rows):
        print(line)
    return 0


def _count_progress() -> Callable[[int, int], None]:
    """Progress of the exact counts on stderr: a live line on a terminal, else a line
    every 50 counts and at the end."""
    live = sys.stderr.isatty()

    def show(done: int, total: int) -> None:
        if live:
            end = "\n" if done == total else ""
            print(f"\r  counted {done}/{total}", end=end, file=sys.stderr, flush=True)
        elif done % 50 == 0 or done == total:
            print(f"  counted {done}/{total}", file=sys.stderr, flush=True)

    return show


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

"""`tokenlens plan --tasks PATH`: what a nightly calibration of a task set costs, per class.

The nightly deployment runs every task of the set under the whole default ladder with the
LLM judge on the answer model (prefect.yaml: `judge: both`, `repeats: 3`). This prices the
fixed design's cells from the set's own prompt sizes (offline token estimates of system,
history, context and question), with and without the Batches discount. The sequential
design (the nightly's default) pays at most this and stops paying for a class once its
verdicts are settled, so the figure is the ceiling of a night, not its expected bill.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tokenlens.compress.arms import build_ladder
from tokenlens.config import DEFAULT_METHODS, DEFAULT_RATES
from tokenlens.decision.planner import ASSUMED_ANSWER_TOKENS, calls_for, price_design
from tokenlens.pricing import PRICES_AS_OF
from tokenlens.tasks import CalibrationTask, load_tasks
from tokenlens.tokens import estimate_tokens


def prompt_tokens(task: CalibrationTask) -> int:
    """Offline estimate of the tokens one answer request of the task sends."""
    parts = [task.system or "", *(turn.content for turn in task.history)]
    return sum(estimate_tokens(text) for text in (*parts, task.context, task.question))


def _money(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.2f}"


def print_nightly(path: Path | None, *, model: str, judge_model: str | None, repeats: int) -> None:
    tasks = load_tasks(path)
    n_arms = len(build_ladder(DEFAULT_METHODS, DEFAULT_RATES))
    judge = judge_model or model
    by_class: dict[str, list[int]] = defaultdict(list)
    for task in tasks:
        by_class[task.task_class].append(prompt_tokens(task))
    print(
        f"Nightly on {path or 'the bundled starter set'}: {len(tasks)} tasks, {repeats} repeats, "
        f"{n_arms} arms + control, answers on {model}, LLM judge on {judge}; "
        f"prices as of {PRICES_AS_OF}; answers priced at {ASSUMED_ANSWER_TOKENS} output tokens"
    )
    header = f"{'class':<24}{'tasks':>6}{'mean tokens':>13}{'calls':>9}{'cost':>12}{'batch':>12}"
    print(header)
    print("-" * len(header))
    totals = [0, 0.0, 0.0]
    priced = True
    for name, sizes in by_class.items():
        mean = sum(sizes) / len(sizes)
        answers, judges = calls_for(len(sizes), repeats, n_arms, llm_judge=True)
        cost = price_design(
            len(sizes), repeats, n_arms, prompt_tokens=mean, model=model, judge_model=judge
        )
        batch = price_design(
            len(sizes),
            repeats,
            n_arms,
            prompt_tokens=mean,
            model=model,
            judge_model=judge,
            batch=True,
        )
        print(
            f"{name:<24}{len(sizes):>6}{mean:>13,.0f}{answers + judges:>9,}"
            f"{_money(cost):>12}{_money(batch):>12}"
        )
        totals[0] += answers + judges
        if cost is None or batch is None:
            priced = False
        else:
            totals[1] += cost
            totals[2] += batch
    print("-" * len(header))
    cost_text = _money(totals[1] if priced else None)
    batch_text = _money(totals[2] if priced else None)
    print(
        f"{'a fixed-design night':<24}{len(tasks):>6}{'':>13}{totals[0]:>9,}"
        f"{cost_text:>12}{batch_text:>12}"
    )
    print(
        "Compressed arms send fewer tokens than the cleartext priced here, and the sequential "
        "design (the nightly default) stops paying for a class once it is decided: both only "
        "lower the bill."
    )

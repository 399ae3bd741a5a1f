"""Reading a finished calibration for the planner, and printing its plans."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tokenlens.calibration.runs import MANIFEST, RunManifest, read_manifest
from tokenlens.compress.arms import CONTROL
from tokenlens.decision.curve import ALL_CLASSES
from tokenlens.decision.evidence import tasks_for_measured
from tokenlens.decision.plan_power import TaskSample, task_samples
from tokenlens.decision.plan_reanswer import ReanswerMeasure, measure_reanswer, reanswer_option
from tokenlens.decision.planner import (
    ASSUMED_JUDGE_SHARE,
    ArmPlan,
    Cleared,
    JudgeOption,
    best_option,
    decision_spread,
    judge_options,
    next_lever,
    plan_arm,
)
from tokenlens.errors import TokenLensError
from tokenlens.formatting import arm_label
from tokenlens.policy import Policy
from tokenlens.pricing import PRICES_AS_OF
from tokenlens.tables import CurveRow, TaskRow

log = logging.getLogger(__name__)

DEFAULT_PROMPT_TOKENS = 1000.0


@dataclass
class PlanInputs:
    run: str | None
    tolerance: float | None
    model: str | None
    curve: list[CurveRow] = field(default_factory=list)
    prompt_tokens: dict[str, float] = field(default_factory=dict)
    #: The LLM judge the run paid for (None: the reference metric, no paid calls), and
    #: judge calls per graded pair (2 when it judged both A/B orders).
    judge_model: str | None = None
    judge_calls_per_pair: int = 1
    #: (class, arm) -> the per-task retentions the run's bound read (from its grades).
    samples: dict[tuple[str, str], TaskSample] = field(default_factory=dict)
    #: class -> what re-answering its disagreeing cells would buy (from its grades);
    #: None when the run kept no grades table to measure it on.
    reanswer: dict[str, ReanswerMeasure] | None = None


def run_judge(policy: Policy | None, manifest: RunManifest | None) -> tuple[str | None, int]:
    """The paid judge a run used and its calls per pair: from the run's recorded settings,
    else from its policy (the deciding judge's name; "metric" is the free one)."""
    if manifest is not None:
        config = manifest.calibration_config()
        if config.judge == "metric":
            return None, 1
        model = config.judge_model or (policy.judge if policy else None) or config.model
        return model, 2 if config.judge_both_orders else 1
    if policy is not None and policy.judge != "metric":
        return policy.judge, 1
    return None, 1


def load_inputs(
    *, run: str | None, reports: str | Path, store: str | Path, tolerance: float | None
) -> PlanInputs:
    """The run's curve, tokens and policy settings; empty inputs when there is no run.

    `reports` and `store` are folders or store URLs (`tokenlens.storage`)."""
    from tokenlens.policy import load_policy
    from tokenlens.storage import location, read_parquet

    published = location(reports)
    latest = published.child("policy", "latest.json")
    policy = None
    if run is None and latest.exists():
        policy = load_policy(latest)
        run = policy.run_id or policy.calibration_id
    elif run is not None and published.child("policy", f"{run}.json").exists():
        policy = load_policy(published.child("policy", f"{run}.json"))
    elif run is not None and published.child("runs", run, "policy.json").exists():
        policy = load_policy(published.child("runs", run, "policy.json"))
    if run is None:
        return PlanInputs(None, tolerance or 0.95, None)
    runs = location(store).child("runs")
    run_dir = runs.child(run)
    if not run_dir.child("curve.parquet").exists():  # a calibration id: its newest run
        from tokenlens.calibration.runs import find_run

        run_dir = runs.child(find_run(store, run).run_id)
    manifest = None
    if run_dir.child(MANIFEST).exists():
        manifest = read_manifest(run_dir.child(MANIFEST))
    judge_model, per_pair = run_judge(policy, manifest)
    curve_path = run_dir.child("curve.parquet")
    try:
        curve = cast(list[CurveRow], read_parquet(curve_path).to_pylist())
    except FileNotFoundError as exc:
        raise TokenLensError(f"{curve_path}: no curve table for calibration {run!r}") from exc
    tokens: dict[str, list[int]] = {}
    try:
        task_rows = cast(list[TaskRow], read_parquet(run_dir.child("tasks.parquet")).to_pylist())
    except FileNotFoundError:
        task_rows = []
    for row in task_rows:
        tokens.setdefault(row["task_class"], []).append(int(row["tokens"]))
    samples, reanswer = _read_grades(run_dir, curve)
    return PlanInputs(
        run,
        tolerance or (policy.tolerance if policy else None),
        policy.model if policy else None,
        curve,
        {c: sum(v) / len(v) for c, v in tokens.items() if v},
        judge_model,
        per_pair,
        samples,
        reanswer,
    )


def _read_grades(
    run_dir: Any, curve: list[CurveRow]
) -> tuple[dict[tuple[str, str], TaskSample], dict[str, ReanswerMeasure] | None]:
    """The run's per-task retentions and its re-answer step per class, read with the
    judge that decided; none when the run kept no grades table (the plan then reads the
    curve alone)."""
    from tokenlens.storage import read_parquet

    judges = {r["judge"] for r in curve if r.get("judge")}
    try:
        grades = read_parquet(run_dir.child("grades.parquet")).to_pandas()
    except FileNotFoundError:
        return {}, None
    judge = next(iter(judges)) if len(judges) == 1 else None
    try:
        return task_samples(grades, judge=judge), measure_reanswer(grades, judge=judge)
    except TokenLensError as exc:  # a table the decision could not read either
        log.warning("%s: planning from the curve alone (%s)", run_dir.url, exc)
        return {}, None


def _num(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def build_plans(inputs: PlanInputs, *, model: str, judge_model: str | None) -> list[ArmPlan]:
    """One plan per class and arm; `judge_model` None plans with the free metric judge."""
    assert inputs.tolerance is not None
    plans: list[ArmPlan] = []
    if not inputs.curve:
        plans.append(
            plan_arm(
                "any class",
                "an arm",
                tolerance=inputs.tolerance,
                retention=None,
                spread=None,
                n_arms=1,
                prompt_tokens=DEFAULT_PROMPT_TOKENS,
                model=model,
                judge_model=judge_model,
                judge_calls_per_pair=inputs.judge_calls_per_pair,
            )
        )
        return plans
    rows = [r for r in inputs.curve if r["task_class"] != ALL_CLASSES and r["arm"] != CONTROL]
    arms_per_class: dict[str, int] = {}
    for r in rows:
        arms_per_class[r["task_class"]] = arms_per_class.get(r["task_class"], 0) + 1
    for r in rows:
        level = _num(r.get("bound_level"))
        spread = decision_spread(
            retention=_num(r.get("retention")),
            low=_num(r.get("retention_low")),
            n_tasks=int(r.get("n_tasks") or 0),
            n_pairs=int(r.get("n_pairs") or 0),
            level=0.95 if level is None else level,
            between=_num(r.get("sd_between")),
            within=_num(r.get("sd_within")),
        )
        low = _num(r.get("retention_low"))
        cleared = None
        if r.get("passes") and low is not None and int(r.get("n_tasks") or 0) > 0:
            n_tasks = int(r.get("n_tasks") or 0)
            reps = int(r.get("n_pairs") or 0) / n_tasks
            cleared = Cleared(
                n_tasks,
                round(reps, 1),
                low,
                bool(r.get("certain")),
                ignored=r.get("status") == "ignored",
            )
        plans.append(
            plan_arm(
                r["task_class"],
                r["arm"],
                tolerance=inputs.tolerance,
                retention=_num(r.get("retention")),
                spread=spread,
                n_arms=arms_per_class[r["task_class"]],
                prompt_tokens=inputs.prompt_tokens.get(r["task_class"], DEFAULT_PROMPT_TOKENS),
                model=model,
                judge_model=judge_model,
                judge_calls_per_pair=inputs.judge_calls_per_pair,
                sample=inputs.samples.get((r["task_class"], r["arm"])),
                cleared=cleared,
            )
        )
    return plans


def _money(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.2f}"


def judge_words(inputs: PlanInputs, judge_model: str | None, *, chosen: bool) -> str:
    """How the plan prices the judge, and whose choice that was."""
    if judge_model is None:
        whose = " (--judge-model metric)" if chosen and inputs.judge_model else ""
        return f"metric (no paid calls){whose}"
    orders = ", both A/B orders" if inputs.judge_calls_per_pair == 2 else ""
    if chosen:
        return f"{judge_model} (--judge-model{orders})"
    return f"{judge_model} (the LLM judge this run paid for{orders})"


def print_plans(
    inputs: PlanInputs, *, model: str, judge_model: str | None, chosen: bool = False
) -> None:
    """`chosen`: `judge_model` came from `--judge-model`, not from the run."""
    plans = build_plans(inputs, model=model, judge_model=judge_model)
    source = f"calibration {inputs.run}" if inputs.run else "stated assumptions (no calibration)"
    print(
        f"Plan from {source}: tolerance {100 * (inputs.tolerance or 0):.1f}%, 80% power, "
        f"one-sided 95% test; answers on {model}, judge "
        f"{judge_words(inputs, judge_model, chosen=chosen)}; prices as of {PRICES_AS_OF}"
    )
    print(
        "Calls count every arm of the class's ladder (they are sampled together); "
        "'✓ tasks' is what a ✓ needs, the rest allow at most ?."
    )
    header = (
        f"{'class':<22}{'arm':<18}{'repeats':>8}{'tasks':>7}{'✓ tasks':>9}{'calls':>8}"
        f"{'cost':>12}{'batch':>12}"
    )
    print(header)
    print("-" * len(header))
    for plan in plans:
        for d in plan.designs:
            tasks = "—" if d.tasks is None else str(d.tasks)
            print(
                f"{plan.task_class:<22}{arm_label(plan.arm):<18}{d.repeats:>8}{tasks:>7}"
                f"{'—' if d.tasks_measured is None else d.tasks_measured:>9}"
                f"{'—' if d.calls is None else d.calls:>8}"
                f"{_money(d.cost_usd) if d.tasks else '—':>12}"
                f"{_money(d.cost_batch_usd) if d.tasks else '—':>12}"
            )
        print(f"{'':<22}{plan.note}")
    if judge_model is not None:
        print(
            "More answers, more judging, or more answers where repeats disagree "
            "(80% power at the tasks a ✓ needs):"
        )
        for line in lever_lines(inputs, plans, model=model, judge_model=judge_model):
            print(f"  {line}")


def judge_share(inputs: PlanInputs, task_class: str) -> float | None:
    """The judge's share of the class's noise floor, when the run measured the split
    (`--judge-twice`); None otherwise."""
    for r in inputs.curve:
        if r["task_class"] == task_class and r["arm"] == CONTROL:
            judge, sampling = _num(r.get("floor_judge")), _num(r.get("floor_sampling"))
            if judge is not None and sampling is not None and judge + sampling > 0:
                return judge / (judge + sampling)
    return None


@dataclass(frozen=True)
class Levers:
    """One arm's options at the tasks a ✓ needs, and the design they step from."""

    options: list[JudgeOption]
    current: tuple[int, int]  # (repeats, judge readings per pair)
    here: JudgeOption
    reanswer: str  # what re-answering would redo, or why there is no such step
    judge_share: float | None


def arm_levers(
    inputs: PlanInputs, plans: list[ArmPlan], plan: ArmPlan, *, model: str, judge_model: str
) -> Levers:
    """Every option for `plan`'s arm at the tasks a ✓ needs, at the run's repeats (3 when
    no grades table says): repeats x readings, and re-answering the cells whose repeats
    disagree where the run's grades measured it."""
    assert inputs.tolerance is not None
    name = plan.task_class
    share = judge_share(inputs, name)
    measure = (inputs.reanswer or {}).get(name)
    repeats = measure.repeats if measure is not None and measure.repeats >= 1 else 3
    current = (repeats, inputs.judge_calls_per_pair)
    n_arms = len([p for p in plans if p.task_class == name])
    priced: dict[str, Any] = {
        "tolerance": inputs.tolerance,
        "retention": plan.assumed_retention,
        "spread": plan.spread,
        "judge_share": share,
        "tasks": tasks_for_measured(inputs.tolerance),
        "n_arms": n_arms,
        "prompt_tokens": inputs.prompt_tokens.get(name, DEFAULT_PROMPT_TOKENS),
        "model": model,
        "judge_model": judge_model,
    }
    options = judge_options(**priced)
    here = next(o for o in options if (o.repeats, o.readings) == current)
    redo, why_not = _reanswer_words(inputs, measure, plan.arm)
    if measure is None or why_not is not None:
        return Levers(options, current, here, f"no re-answer step: {why_not}", share)
    options.append(
        reanswer_option(
            repeats=current[0],
            readings=current[1],
            within_scale=measure.within_scale(plan.arm),
            extra_per_task=measure.extra_per_task(n_arms),
            **priced,
        )
    )
    gain = options[-1].power - here.power
    extra = (options[-1].cost_usd or 0.0) - (here.cost_usd or 0.0)
    return Levers(options, current, here, f"{redo}: +{gain:.0%} power for {_money(extra)}", share)


def lever_lines(
    inputs: PlanInputs, plans: list[ArmPlan], *, model: str, judge_model: str
) -> list[str]:
    """Per class, at the tasks a ✓ needs: more answers (repeats), more judging (both A/B
    orders), or more answers only where the repeats disagree (`--reanswer`)? Read for the
    class's hardest arm that can hold (smallest positive margin)."""
    assert inputs.tolerance is not None
    need = tasks_for_measured(inputs.tolerance)
    lines: list[str] = []
    classes = dict.fromkeys(p.task_class for p in plans)
    for name in classes:
        mine = [p for p in plans if p.task_class == name and p.assumed_retention > inputs.tolerance]
        if not mine:
            continue
        plan = min(mine, key=lambda p: p.assumed_retention)
        levers = arm_levers(inputs, plans, plan, model=model, judge_model=judge_model)
        share, current = levers.judge_share, levers.current
        noise = (
            f"the judge is {share:.0%} of the noise floor (measured)"
            if share is not None
            else f"judge share of the noise unknown, {ASSUMED_JUDGE_SHARE:.0%} assumed "
            "(--judge-twice measures it)"
        )
        step = next_lever(levers.options, *current)
        best = best_option(levers.options)
        words = [
            f"{name} ({arm_label(plan.arm)}) at {need} tasks: {noise}; "
            f"{current[0]} repeats x {current[1]} reading(s) {levers.here.power:.0%} power",
            levers.reanswer,
        ]
        if step is not None:
            words.append(f"next dollar: {step[0]} (+{step[1]:.0%} power for {_money(step[2])})")
        if best is not None:
            orders = ", both A/B orders" if best.readings == 2 else ""
            orders += ", re-answering where repeats disagree" if best.reanswer else ""
            words.append(
                f"cheapest with 80% power: {best.repeats} repeats{orders}, {_money(best.cost_usd)}"
            )
        else:
            words.append("no option here reaches 80% power at this size")
        lines.append("; ".join(words))
    return lines


def _reanswer_words(
    inputs: PlanInputs, measure: ReanswerMeasure | None, arm: str
) -> tuple[str, str | None]:
    """What re-answering would pay for (the cells it picks), or why there is no such step."""
    if inputs.reanswer is None:
        return "", "no grades table to see where repeats disagree"
    if measure is None:
        return "", "no graded pairs of this class"
    if measure.repeats < 2:
        return "", f"{measure.repeats} repeat, nothing to disagree"
    if measure.already:
        return "", "this run re-answered already"
    share = measure.cells_redone / measure.cells if measure.cells else 0.0
    return (
        f"re-answering would redo {share:.0%} of cells ({measure.cells_redone} of "
        f"{measure.cells}), {measure.removed.get(arm, 0.0):.0%} of the arm's "
        "within-task noise",
        None,
    )

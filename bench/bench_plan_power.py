"""Does `tokenlens plan`'s size hold the arm in the stated 80 % of calibrations?

For each world, one arm alone: a large pilot calibration (20,000 tasks x 2 repeats) is
planned twice, by drawing calibrations from its per-task retentions and applying the
decision's rule (what `tokenlens plan` does with the run's grades table), and by the
normal formula on the spread its curve's bound implies (what it does with a curve
alone); then `--runs` calibrations of each planned size are simulated and the share
whose bound holds the arm (?) and that are ✓ at the ✓ size is printed.

With `--reanswer RUNS`: the planner's next-step lines against the judge-lever simulation.
A pilot calibration (`--pilot` tasks x 3, the probe arms) of the noisy world, of the
same without derails (its disagreements all chance), and of a quiet one (a steady
judge, no derails) is planned as `tokenlens plan` plans a class;
the predicted power at the ✓'s tasks x 3 of the plain design, of re-answering where
repeats disagree, of a 4th repeat and of both A/B orders (averaged over the arms that
truly clear the tolerance by 2 points) is printed beside the simulated power of each
(`tokenlens.simulate_judge.run_lever`, RUNS calibrations), with both prices.

Usage: .venv/bin/python bench/bench_plan_power.py [--runs 400] [--pilot 20000] [--quick]
       .venv/bin/python bench/bench_plan_power.py --reanswer 200 [--pilot 2000]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from dataclasses import replace

import numpy as np

from tokenlens.commands.plan_view import PlanInputs, arm_levers, build_plans
from tokenlens.decision import aggregate
from tokenlens.decision.plan_power import task_samples
from tokenlens.decision.plan_reanswer import measure_reanswer
from tokenlens.decision.planner import next_lever
from tokenlens.simulate import (
    DEFAULT_SCENARIOS,
    POWER_MARGIN,
    PROBE_ARMS,
    Scenario,
    SimArm,
    simulate_grades,
)
from tokenlens.simulate_judge import DERAIL_GUARD, REANSWER_SPREAD, Lever, run_lever
from tokenlens.simulate_study import WORLDS as STUDY_WORLDS

TOLERANCE = 0.95
MODEL = "claude-haiku-4-5"
WORLDS: dict[str, Scenario] = {
    "spread 97.5 %": replace(
        DEFAULT_SCENARIOS[1], arms=(SimArm("prune@0.6", 0.975, 0.3),), replicates=2
    ),
    "concentrated 99 %": replace(
        DEFAULT_SCENARIOS[0], arms=(SimArm("prune@0.6", 0.99, 0.3),), replicates=2
    ),
}


def _row(grades: object) -> dict[str, object]:
    curve = aggregate(grades, tolerance=TOLERANCE, pooled=False)  # type: ignore[arg-type]
    [row] = [r for r in curve.table.to_dict("records") if r["arm"] == "prune@0.6"]
    return row


def _share(world: Scenario, tasks: int, column: str, runs: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    sized = replace(world, n_tasks=tasks)
    return sum(bool(_row(simulate_grades(sized, rng))[column]) for _ in range(runs)) / runs


#: The worlds the re-answer step is read in: many cells disagree, and next to none do.
#: "wobble": the noisy world without derails, where every disagreement is chance.
LEVER_WORLDS: dict[str, Scenario] = {
    "noisy": STUDY_WORLDS["noisy"],
    "wobble": replace(STUDY_WORLDS["noisy"], derail=0.0),
    "quiet": replace(STUDY_WORLDS["concentrated"], derail=0.0),
}
#: The plan's options (repeats, readings, re-answer) and the simulated lever of each.
STEPS: tuple[tuple[str, tuple[int, int, bool], Lever], ...] = (
    ("plain 60x3", (3, 1, False), Lever("one reading")),
    (
        "re-answer",
        (3, 1, True),
        Lever("re-answer, derail guard", reanswer=REANSWER_SPREAD, derail_guard=DERAIL_GUARD),
    ),
    ("4th repeat", (4, 1, False), Lever("4 repeats", repeats=4)),
    ("both A/B orders", (3, 2, False), Lever("both orders", judge_calls=2)),
)


def reanswer_bench(runs: int, pilot_tasks: int) -> None:
    """Predicted against simulated power of each next step (module docstring)."""
    print(
        f"{'world':<7}{'step':<17}{'predicted':>10}{'simulated':>10}{'plan $':>8}{'sim $':>8}"
        f"{'plan pts/$':>11}{'sim pts/$':>10}"
    )
    for name, world in LEVER_WORLDS.items():
        scenario = replace(world, arms=PROBE_ARMS, n_tasks=pilot_tasks, replicates=3)
        pilot = simulate_grades(scenario, np.random.default_rng(11))
        curve = aggregate(pilot, tolerance=TOLERANCE, pooled=False).table.to_dict("records")
        inputs = PlanInputs(
            "pilot",
            TOLERANCE,
            MODEL,
            curve,
            samples=task_samples(pilot, judge=None),
            reanswer=measure_reanswer(pilot, judge=None),
        )
        plans = build_plans(inputs, model=MODEL, judge_model=MODEL)
        good = {a.key for a in PROBE_ARMS if a.true_retention >= TOLERANCE + POWER_MARGIN}
        options = [
            {
                (o.repeats, o.readings, o.reanswer): o
                for o in arm_levers(inputs, plans, p, model=MODEL, judge_model=MODEL).options
            }
            for p in plans
            if p.arm in good
        ]
        base: tuple[float, float, float, float] | None = None
        for step, key, lever in STEPS:
            mine = [o[key] for o in options]
            predicted = float(np.mean([o.power for o in mine]))
            plan_cost = mine[0].cost_usd or float("nan")
            sim = run_lever(world, lever, 0.0, runs=runs, seed=12)
            figures = (predicted, sim.power, plan_cost, sim.cost_usd)
            base = base or figures
            gains = [
                f"{100 * (figures[i] - base[i]) / (figures[i + 2] - base[i + 2]):.1f}"
                if figures[i + 2] > base[i + 2] + 0.01
                else "—"  # the plain design, or a step that costs (next to) nothing here
                for i in (0, 1)
            ]
            print(
                f"{name:<7}{step:<17}{predicted:>10.1%}{sim.power:>10.1%}{plan_cost:>8.2f}"
                f"{sim.cost_usd:>8.2f}{gains[0]:>11}{gains[1]:>10}"
            )
        measure = inputs.reanswer["sim"] if inputs.reanswer else None
        if measure is not None:
            removed = np.mean([measure.removed.get(k, 0.0) for k in good])
            named = Counter(
                str((next_lever(list(o.values()), 3, 1) or ("none",))[0]) for o in options
            )
            print(
                f"{name:<7}re-answer picks {measure.cells_redone / measure.cells:.1%} of cells "
                f"on the pilot; it removes {removed:.0%} of the good arms' within-task term; "
                f"the plan's next dollar per good arm: {dict(named)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--pilot", type=int, default=None, help="pilot tasks (default 20000)")
    parser.add_argument("--quick", action="store_true", help="every code path, small (tests)")
    parser.add_argument(
        "--reanswer",
        type=int,
        default=0,
        metavar="RUNS",
        help="only the planner's next steps against the lever simulation, RUNS per step",
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.pilot = 5, 500
    if args.reanswer or args.quick:
        runs = args.reanswer or 2
        pilot = args.pilot or 2000
        print(f"load average {os.getloadavg()[0]:.1f}; re-answer: pilot {pilot} x 3, {runs} runs")
        start = time.process_time()
        reanswer_bench(runs, pilot)
        print(f"re-answer rows: {time.process_time() - start:.0f} s CPU")
        if args.reanswer:
            return
    args.pilot = args.pilot or 20_000
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs per size")
    for name, world in WORLDS.items():
        pilot = simulate_grades(replace(world, n_tasks=args.pilot), np.random.default_rng(1))
        row = _row(pilot)
        for how, samples in (("drawn", task_samples(pilot, judge=None)), ("formula", {})):
            inputs = PlanInputs("pilot", TOLERANCE, MODEL, [row], samples=samples)  # type: ignore[list-item]
            start = time.process_time()
            [plan] = build_plans(inputs, model=MODEL, judge_model=None)
            cpu = time.process_time() - start
            [design] = [d for d in plan.designs if d.repeats == world.replicates]
            assert design.tasks is not None and design.tasks_measured is not None
            held = _share(world, design.tasks, "passes", args.runs, 2)
            certain = _share(world, design.tasks_measured, "certain", args.runs, 3)
            print(
                f"{name:<18} {how:<8} ? {design.tasks:>4} tasks held {held:6.1%}   "
                f"✓ {design.tasks_measured:>4} tasks certain {certain:6.1%}   "
                f"(plan {cpu:.2f} s CPU, 3 designs)"
            )


if __name__ == "__main__":
    main()

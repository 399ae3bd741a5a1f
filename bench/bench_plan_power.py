"""Does `tokenlens plan`'s size hold the arm in the stated 80 % of calibrations?

For each world, one arm alone: a large pilot calibration (20,000 tasks x 2 repeats) is
planned twice, by drawing calibrations from its per-task retentions and applying the
decision's rule (what `tokenlens plan` does with the run's grades table), and by the
normal formula on the spread its curve's bound implies (what it does with a curve
alone); then `--runs` calibrations of each planned size are simulated and the share
whose bound holds the arm (?) and that are ✓ at the ✓ size is printed.

Usage: .venv/bin/python bench/bench_plan_power.py [--runs 400] [--pilot 20000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np

from tokenlens.commands.plan_view import PlanInputs, build_plans
from tokenlens.decision import aggregate
from tokenlens.decision.plan_power import task_samples
from tokenlens.simulate import DEFAULT_SCENARIOS, Scenario, SimArm, simulate_grades

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--pilot", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="every code path, small (tests)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.pilot = 5, 500
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

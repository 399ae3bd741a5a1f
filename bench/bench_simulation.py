"""Simulation study of the decision rules: false application, power, coverage, calls.

Runs `tokenlens.simulate.run_study` on every world of `DEFAULT_SCENARIOS` at every design
(tasks 5/10/20/40 x repeats 1/3) and prints, per world and design:

* false ✓ and false ✓|?: share of arms one point below the 95 % tolerance that come
  back ✓, or ✓ or ? (they would be applied; goal <= 5 % in every design)
* power: share of arms with true retention >= tolerance + 2 points that hold
  (goal >= 70 % at 20 tasks x 3 repeats)
* coverage: share of 90 % intervals (two one-sided 95 % bounds) holding the truth
* calls: paid calls of the design for one arm with an LLM judge

`--mode mean` (the seed's rule) is scored on the same data for comparison.

Then the sequential design against the fixed one at 20 tasks x 3 repeats, paired on the
same draws (`tokenlens.simulate_sequential`): false application, power and mean calls
per class, on lone arms and on a six-arm ladder (goal: same or better decisions for
<= 60 % of the fixed design's calls).

Usage: .venv/bin/python bench/bench_simulation.py [--runs 150] [--seq-runs 60] [--seed N] [--quick]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from tokenlens.simulate import (
    DEFAULT_SCENARIOS,
    DESIGN_REPEATS,
    DESIGN_TASKS,
    SimArm,
    StudyResult,
    Tally,
    calls_per_design,
    designs,
    run_study,
)
from tokenlens.simulate_sequential import compare, lone_arm_worlds

#: A realistic ladder: gentle rungs lossless, pruning borderline, aggressive rungs harmful.
LADDER = (
    SimArm("safe", 1.0, 0.02),
    SimArm("minify", 1.0, 0.05),
    SimArm("prune@0.8", 0.99, 0.15),
    SimArm("prune@0.6", 0.97, 0.28),
    SimArm("prune@0.4", 0.90, 0.45),
    SimArm("select@0.4", 0.85, 0.5),
)


def _sequential(runs: int, seed: int) -> None:
    concentrated, spread = DEFAULT_SCENARIOS[0], DEFAULT_SCENARIOS[1]
    worlds = [
        *lone_arm_worlds(replace(concentrated, n_tasks=20, replicates=3), (0.94, 0.97, 1.0)),
        replace(concentrated, name="concentrated ladder", arms=LADDER, n_tasks=20, replicates=3),
        replace(spread, name="spread ladder", arms=LADDER, n_tasks=20, replicates=3),
    ]
    print(
        f"\n{'world (20 tasks x 3 repeats)':30} {'design':>10} {'false applied':>14} "
        f"{'power':>7} {'mean calls':>11} {'share':>7}"
    )
    ladder_fixed = ladder_seq = 0.0
    for index, world in enumerate(worlds):
        fixed, seq = compare(world, runs=runs, seed=seed + index)
        if world.name.endswith("ladder"):
            ladder_fixed += fixed.mean_calls
            ladder_seq += seq.mean_calls
        for t in (fixed, seq):
            share = t.mean_calls / fixed.mean_calls
            print(
                f"{world.name:30} {t.design:>10} {_fmt(t.false_rate):>14} {_fmt(t.power):>7} "
                f"{t.mean_calls:11.0f} {_fmt(share):>7}"
            )
    print(
        f"SUMMARY sequential calls on the six-arm ladders: {_fmt(ladder_seq / ladder_fixed)} of "
        f"the fixed design's (goal <= 60%), {runs} paired runs each"
    )


def _fmt(value: float) -> str:
    return "   n/a" if value != value else f"{100 * value:5.1f}%"


def _print(result: StudyResult) -> None:
    print(
        f"{'world':14} {'design':>6} {'false ✓':>8} {'false ✓|?':>10} {'power':>7} "
        f"{'coverage':>9} {'calls':>6} {'mean-rule false ✓|?':>20}"
    )
    by_key: dict[tuple[str, str], Tally] = {(t.scenario, t.mode): t for t in result.tallies}
    for name in dict.fromkeys(t.scenario for t in result.tallies):
        t = by_key[(name, "interval")]
        m = by_key.get((name, "mean"))
        world, design = name.rsplit(" ", 1)
        print(
            f"{world:14} {design:>6} {_fmt(t.false_certify_rate):>8} "
            f"{_fmt(t.false_held_rate):>10} {_fmt(t.power):>7} {_fmt(t.coverage):>9} "
            f"{calls_per_design(t.n_tasks, t.replicates, 1):6d} "
            f"{_fmt(m.false_held_rate) if m else '':>20}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=150, help="calibrations per world x design")
    parser.add_argument("--seq-runs", type=int, default=60, help="paired runs per world (0: skip)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.seq_runs = 2, 1

    for s in DEFAULT_SCENARIOS:
        arms = ", ".join(f"{a.key} true={a.true_retention:.2f}" for a in s.arms)
        print(
            f"{s.name}: harm {s.harm}, judge sd {s.judge_sd}, sampling sd {s.sampling_sd}, "
            f"grades in steps of {s.grade_step}, derail {s.derail:.1%}, errors "
            f"{s.error_rate:.0%}, missing {s.missing_rate:.0%}, tolerance {s.tolerance}; {arms}"
        )
    start = time.perf_counter()
    worlds = designs(DEFAULT_SCENARIOS, DESIGN_TASKS, DESIGN_REPEATS)
    result = run_study(worlds, runs=args.runs, seed=args.seed)
    print(f"\n{args.runs} runs per world x design, {time.perf_counter() - start:.0f} s\n")
    _print(result)

    interval = [t for t in result.tallies if t.mode == "interval"]
    worst = max(interval, key=lambda t: t.false_held_rate)
    print(
        f"\nSUMMARY worst false application (✓|?) over every world and design: "
        f"{_fmt(worst.false_held_rate)} ({worst.scenario}; goal <= 5%)"
    )
    for t in interval:
        if t.n_tasks == 20 and t.replicates == 3:
            print(f"SUMMARY power at 20x3, {t.scenario.rsplit(' ', 1)[0]}: {_fmt(t.power)}")
    total = result.combined("interval")
    print(f"SUMMARY coverage of 90% intervals overall: {_fmt(total.coverage)} (goal >= 88%)")
    mean = result.combined("mean")
    print(f"SUMMARY mean mode (seed rule) false application overall: {_fmt(mean.false_held_rate)}")
    if args.seq_runs:
        start = time.perf_counter()
        _sequential(args.seq_runs, args.seed)
        print(f"(sequential comparison: {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()

"""Simulation study of the decision rules: false-certify rate and interval coverage.

Runs `tokenlens.simulate.run_study` on the default scenarios (known true retention per
arm, judge noise, sampling noise, task heterogeneity; 5 tasks x 3 replicates like a
starter-set class) and prints, per scenario and overall:

* false ✓: share of arms whose true loss exceeds the tolerance that come back ✓ (goal <= 5 %)
* false held: the same for ✓ or ? (the arm would be applied)
* coverage: share of 95 % retention intervals containing the true retention (goal >= 93 %)
* power: share of arms within tolerance that the walk held

Usage: .venv/bin/python bench/bench_simulation.py [--runs 400] [--bootstrap-runs 150]
"""

from __future__ import annotations

import argparse
import time

from tokenlens.simulate import DEFAULT_SCENARIOS, StudyResult, Tally, run_study


def _fmt(value: float) -> str:
    return "  n/a" if value != value else f"{100 * value:5.1f}%"


def _print(result: StudyResult, label: str) -> None:
    print(f"\n== {label}")
    print(
        f"{'scenario':16} {'mode':8} {'runs':>5} {'false ✓':>8} {'false held':>10} "
        f"{'coverage':>9} {'power':>7} {'bad arms':>8} {'intervals':>9}"
    )
    rows: list[Tally] = list(result.tallies)
    for mode in dict.fromkeys(t.mode for t in result.tallies):
        rows.append(result.combined(mode))
    for t in rows:
        print(
            f"{t.scenario:16} {t.mode:8} {t.runs:5d} {_fmt(t.false_certify_rate):>8} "
            f"{_fmt(t.false_held_rate):>10} {_fmt(t.coverage):>9} {_fmt(t.power):>7} "
            f"{t.bad_arm_cases:8d} {t.intervals:9d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="calibrations per scenario")
    parser.add_argument(
        "--bootstrap-runs",
        type=int,
        default=150,
        help="runs per scenario for the bootstrap comparison (0: skip)",
    )
    parser.add_argument("--seed", type=int, default=20260715)
    args = parser.parse_args()

    for s in DEFAULT_SCENARIOS:
        arms = ", ".join(f"{a.key} true={a.true_retention:.2f}" for a in s.arms)
        print(
            f"{s.name}: {s.n_tasks} tasks x {s.replicates} reps, judge sd {s.judge_sd}, "
            f"sampling sd {s.sampling_sd}, task sd {s.task_sd}, tolerance {s.tolerance}; {arms}"
        )

    start = time.perf_counter()
    main_result = run_study(DEFAULT_SCENARIOS, runs=args.runs, seed=args.seed)
    elapsed = time.perf_counter() - start
    _print(main_result, f"cluster-robust t intervals (default), {elapsed:.0f} s")

    if args.bootstrap_runs:
        start = time.perf_counter()
        boot = run_study(
            DEFAULT_SCENARIOS,
            runs=args.bootstrap_runs,
            seed=args.seed + 1,
            modes=("interval",),
            interval_method="bootstrap",
        )
        _print(boot, f"percentile task bootstrap, {time.perf_counter() - start:.0f} s")

    total = main_result.combined("interval")
    print(
        f"\nSUMMARY interval mode: false-certify {_fmt(total.false_certify_rate)} "
        f"(goal <= 5%), coverage {_fmt(total.coverage)} (goal >= 93%), "
        f"{total.runs} simulated calibrations"
    )
    mean = main_result.combined("mean")
    print(
        f"SUMMARY mean mode (seed rule): false-certify {_fmt(mean.false_certify_rate)}, "
        f"false held {_fmt(mean.false_held_rate)}"
    )


if __name__ == "__main__":
    main()

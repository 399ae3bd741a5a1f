"""What capping the skew correction's skewness buys and costs (`tokenlens.stats.SKEW_CAP`).

Each arm of a probe ladder alone (true retention 0.94, 0.97, 0.99, 1.00; the fixed
design, the rule's own bound), read with the sample skewness taken as read and capped,
on the same draws, at 20 / 40 / 60 tasks x 1 / 3 repeats: the share of calibrations
that apply the 0.94 arm (must stay <= 5 %), that certify it (✓, 60 tasks), and power
(the good arms held). Worlds: the study's four, plus three the cap could hurt or help
most: *quiet* (a near-noiseless judge, no derails: samples show their outliers
sharply), *quiet-derail* (the same with the concentrated world's derails and grades in
steps of 5) and *rare-severe* (7 % of tasks lose 70-100 %, hard tasks no likelier:
at 20 tasks a quarter of samples hold no hurt task, which no rule can see).

Usage: .venv/bin/python bench/bench_skew_cap.py [--runs 1000] [--processes 2] [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import tokenlens.stats as stats
from tokenlens.simulate import PROBE_ARMS, Scenario, Tally, designs, run_study
from tokenlens.simulate_study import WORLDS

_CONCENTRATED = WORLDS["concentrated"]
EXTRA_WORLDS: dict[str, Scenario] = {
    "quiet": replace(
        _CONCENTRATED, name="quiet", judge_sd=0.5, sampling_sd=1.0, grade_step=1, derail=0.0
    ),
    "quiet-derail": replace(_CONCENTRATED, name="quiet-derail", judge_sd=0.5, sampling_sd=1.0),
    "rare-severe": replace(
        _CONCENTRATED,
        name="rare-severe",
        hurt_ratio=1.0,
        task_loss=(0.7, 1.0),
        judge_sd=1.0,
        sampling_sd=1.0,
    ),
}


def _job(
    job: tuple[str, Scenario, float, tuple[int, ...], tuple[int, ...], int, int],
) -> list[Tally]:
    name, world, cap, tasks, repeats, runs, seed = job
    stats.SKEW_CAP = cap  # this process's rule; the same draws for either cap (same seed)
    cells = designs([replace(world, name=name, arms=PROBE_ARMS)], tasks, repeats)
    return run_study(cells, runs=runs, seed=seed, modes=("interval",)).tallies


def _pct(value: float) -> str:
    return "   n/a" if math.isnan(value) else f"{100 * value:5.1f}%"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="calibrations per cell")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261204)
    parser.add_argument("--quick", action="store_true", help="a few runs, two worlds: seconds")
    args = parser.parse_args(argv)
    worlds = {**WORLDS, **EXTRA_WORLDS}
    tasks, repeats = (20, 40, 60), (1, 3)
    if args.quick:
        worlds = {k: worlds[k] for k in ("concentrated", "rare-severe")}
        tasks, repeats, args.runs, args.processes = (40,), (3,), 4, 1
    caps = (math.inf, stats.SKEW_CAP)
    jobs = [
        (name, world, cap, tasks, repeats, args.runs, args.seed)
        for name, world in worlds.items()
        for cap in caps
    ]
    start = time.perf_counter()
    if args.processes > 1:
        with ProcessPoolExecutor(args.processes) as pool:
            parts = list(pool.map(_job, jobs))
    else:
        parts = [_job(job) for job in jobs]
    elapsed = time.perf_counter() - start
    print(
        f"{'world, design':24} {'runs':>5}  {'0.94 applied':>15}  {'0.94 certified':>15}  "
        f"{'power':>15}   (skewness as read -> capped at {stats.SKEW_CAP:g})"
    )
    for index in range(0, len(parts), 2):
        for before, after in zip(parts[index], parts[index + 1], strict=True):
            figures = [
                f"{_pct(getattr(before, k))} ->{_pct(getattr(after, k))}"
                for k in ("false_held_rate", "false_certify_rate")
            ]
            power = [t.good_held / t.good_arm_cases for t in (before, after)]
            figures.append(f"{_pct(power[0])} ->{_pct(power[1])}")
            print(f"{before.scenario:24} {before.runs:>5}  " + "  ".join(figures))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"({elapsed:.0f} s, {args.processes} processes, load average {load:.2f})")


if __name__ == "__main__":
    main()

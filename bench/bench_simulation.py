"""Simulation study of the decision rule: false application, power, savings, calls.

One file past 500 lines on purpose: one command with one small function per study
(`--paired`, `--judge-levers`, `--derail-cost`, ...), each only printing what the
`tokenlens.simulate*` modules compute, over shared worlds and row formats.

Drives the real `aggregate` + `decide` (fixed design) and `run_sequential` (sequential,
paired on the same draws) over the hard worlds of `tokenlens.simulate_study` at every
design the minimum-evidence rule allows a ? at (20/40 tasks x 1/3 repeats), and prints
per world x design x (fixed | sequential):

* false applied: share of calibrations that apply (✓ or ?) an arm of true retention 0.94
  against the 0.95 tolerance, with its 95 % Wilson interval (goal <= 5 %);
* power: share of the ladder's good arms (true >= 0.97) the published policy reaches
  (goal >= 70 % at 20 x 3); for the fixed design also each arm alone (`passes`);
* savings: the published arm's token reduction over the oracle's (the strongest arm whose
  true retention holds; a wrongly applied arm saves nothing), goal >= 80 % at 20 x 3;
* calls: paid calls per calibration (both classes).

Then the noiseless ceilings (`tokenlens.simulate_judge.Ceiling`): the same rule fed each
task's true retention (no judge, no sampling noise), and the best threshold on the mean
set on the 0.94 arm or on an arm at the tolerance: what no noise-cancelling lever can beat.

Usage: .venv/bin/python bench/bench_simulation.py [--quick] [--runs 1000] [--other-runs 300]
       [--seed N] [--processes 2] [--worlds concentrated,noisy] [--designs 20x3]
       .venv/bin/python bench/bench_simulation.py --compare-intervals 1000   # the candidates
       .venv/bin/python bench/bench_simulation.py --derail-cost 1000   # what derails cost
       .venv/bin/python bench/bench_simulation.py --lone-derail 1000   # derails set aside
       .venv/bin/python bench/bench_simulation.py --paired 400   # fixed vs sequential, ✓
       .venv/bin/python bench/bench_simulation.py --paired 1000 --worlds noisy --designs 60x3 \
           --why   # one cell, and why each run certified by one design only was missed
       .venv/bin/python bench/bench_simulation.py --paired 400 --worlds noisy --designs 60x3 \
           --reanswer   # both designs re-answering, against the same draws without it
       .venv/bin/python bench/bench_simulation.py --judge-levers 300   # judge noise levers
       .venv/bin/python bench/bench_simulation.py --judge-levers 500 --levers "re-answer|4 rep"
The `--mode mean` comparison and the seed's worked example live in tests/decision.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from tokenlens.simulate import (
    PROBE_ARMS,
    Scenario,
    StudyResult,
    designs,
    simulate_grades,
)
from tokenlens.simulate import run_study as study_of_arms
from tokenlens.simulate_judge import CEILING_TOLERANCE, Ceiling, ceiling
from tokenlens.simulate_study import DESIGNS, PLAIN, WORLDS, CellTally, run_study
from tokenlens.stats import IntervalMethod, ratio_estimate


def _pct(value: float) -> str:
    return "   n/a" if value != value else f"{100 * value:5.1f}%"


def _row(t: CellTally) -> str:
    low, high = t.false_ci
    return (
        f"{t.world:15} {t.tasks:>3}x{t.repeats:<2} {t.design:>10} {t.runs:>5} "
        f"{_pct(t.false_rate):>7} [{_pct(low).strip()}, {_pct(high).strip()}]".ljust(52)
        + f" {_pct(t.power):>7} {_pct(t.alone_power):>7} {_pct(t.savings_share):>8} "
        f"{t.calls_per_run:7.0f}"
    )


def compare_intervals(runs: int, seed: int) -> None:
    """The interval candidates on the same draws (fixed design, each arm alone, the
    study of `tokenlens.simulate`): false application of the 0.94 arm, power of the rest."""
    worlds = [WORLDS["concentrated"], WORLDS["noisy"]]
    named = [
        replace(w, name=n, arms=PROBE_ARMS)
        for n, w in zip(("concentrated", "noisy"), worlds, strict=True)
    ]
    cells = designs(named, (20, 40), (1, 3))
    methods: tuple[IntervalMethod, ...] = ("cluster_t", "bootstrap", "skew_t")
    print(f"\n{'interval (fixed, arm alone)':28} " + " ".join(f"{m:>22}" for m in methods))
    results = {m: simulate_study_of(cells, runs, seed, m) for m in methods}
    for index, cell in enumerate(cells):
        figures = []
        for m in methods:
            t = results[m].tallies[index]
            figures.append(f"{_pct(t.false_held_rate)} / {_pct(t.power)}")
        print(f"{cell.name:28} " + " ".join(f"{f:>22}" for f in figures))
    print("(false application of the 0.94 arm / power of the 0.97, 0.99 and 1.00 arms)")


#: The world where compression's only harm is extra derails: a derail keeps ~15 of ~80
#: points, so the rate that makes the arm's true retention 0.94 is base + 0.06 / (1 - 15/80).
DERAIL_BASE = 0.015
DERAIL_HARMED = DERAIL_BASE + 0.06 / (1 - 15 / 80)


def derail_cost(runs: int, seed: int) -> None:
    """Why power stops near half at 20 x 3: derailed answers, not judge noise.

    Each arm alone (fixed design, the rule's own `passes`) in the concentrated and noisy
    worlds at 20 x 3, with the world's derail rate and with none. Then the obvious
    remedy, a rule blind to a lone derail (each task's median over its repeats instead of
    its pooled sums), in a world where compression's only harm is *more* derails (an arm
    at true 0.94): what it would apply."""
    from tokenlens.decision import aggregate
    from tokenlens.simulate_study import BORDERLINE, LADDER, TOLERANCE

    arms = (*LADDER[:3], *BORDERLINE)
    print(
        f"\n{'derail cost, 20x3, each arm alone':38} "
        + " ".join(f"{a.true_retention:>6.2f}" for a in arms)
    )
    for name in ("concentrated", "noisy"):
        for derail in (WORLDS[name].derail, 0.0):
            world = replace(
                WORLDS[name],
                n_tasks=20,
                replicates=3,
                tolerance=TOLERANCE,
                arms=arms,
                derail=derail,
            )
            rng = np.random.default_rng([seed, int(derail * 1000), len(name)])
            held = dict.fromkeys((a.key for a in arms), 0)
            for _ in range(runs):
                rows = aggregate(
                    simulate_grades(world, rng, task_class="x"),
                    tolerance=TOLERANCE,
                    pooled=False,
                ).rows("x")
                for key in rows.loc[rows["passes"].astype(bool), "arm"]:
                    held[key] += 1
            label = f"{name}, derail {derail:.1%}"
            print(f"{label:38} " + " ".join(f"{_pct(held[a.key] / runs):>6}" for a in arms))
    rng = np.random.default_rng(seed)
    n, r, base_rate, harmed_rate = 20, 3, DERAIL_BASE, DERAIL_HARMED
    applied = {"pooled sums, every answer": 0, "median of repeats": 0}
    for _ in range(runs):
        quality = rng.uniform(60, 100, n)

        comp, clear = (
            _answers(rng, quality, rate, count)
            for rate, count in ((harmed_rate, r), (base_rate, 2 * r))
        )
        for label, num, den in (
            ("pooled sums, every answer", comp.mean(1), clear.mean(1)),
            ("median of repeats", np.median(comp, 1), np.median(clear, 1)),
        ):
            ratio = np.minimum(num / den, 1.1)
            est = ratio_estimate(ratio, np.ones(n), confidence=0.9, method="skew_t")
            applied[label] += int(est.low is not None and est.low >= TOLERANCE)
    for label, count in applied.items():
        print(
            f"harm as derails ({harmed_rate:.1%} vs {base_rate:.1%}), arm truly 0.94, "
            f"{label}: applied {_pct(count / runs).strip()}"
        )


#: Worlds where compression's harm is in single answers, not in tasks (an arm of true
#: retention ~0.94 over a lossless one): extra derails (a derail keeps ~15 of ~80 points),
#: or answers that each lose 30-60 %. What setting derails aside must not forgive.
ANSWER_HARM = {"extra derails": 0.073, "per-answer losses": 0.133}


def _harm_answers(grades: pd.DataFrame, rng: np.random.Generator, kind: str) -> pd.DataFrame:
    """Hurt single compressed answers of the arm `prune@0.6` at `ANSWER_HARM[kind]`."""
    rows = (grades["arm"] == "prune@0.6") & grades["grade_comp"].notna()
    graded = grades.loc[rows, "grade_comp"].to_numpy(float)
    hit = rng.random(graded.size) < ANSWER_HARM[kind]
    if kind == "extra derails":
        hurt = rng.uniform(0, 30, graded.size)
    else:
        hurt = graded * (1 - rng.uniform(0.3, 0.6, graded.size))
    out = grades.copy()
    out.loc[rows, "grade_comp"] = np.where(hit, np.round(hurt / 5) * 5, graded)
    return out


def lone_derail(runs: int, seed: int) -> None:
    """What setting derailed answers aside (`tokenlens.decision.derails`) buys and costs.

    Each arm alone at 20 x 3, its bound read over every answer -> over the answers the
    rule keeps: in the study's worlds (the 0.94 arm must stay within 5 %), then in
    worlds where compression's harm is in single answers (extra derails, per-answer
    losses), where a rule that forgave derails would apply a 0.94 arm."""
    from tokenlens.decision.curve import ALPHA, _pooled
    from tokenlens.decision.derails import set_aside
    from tokenlens.decision.grades import ArmPairs, ClassGrades, prepare
    from tokenlens.simulate_study import BORDERLINE, LADDER, TOLERANCE

    def holds(pairs: ArmPairs, n: int) -> bool:
        low = _pooled(pairs, n, "skew_t", 0, ALPHA).low
        return low is not None and low >= TOLERANCE

    def tally(world: Scenario, kind: str | None, rng: np.random.Generator) -> dict[str, list[int]]:
        held = {a.key: [0, 0] for a in world.arms}
        for _ in range(runs):
            grades = simulate_grades(world, rng, task_class="x")
            if kind:
                grades = _harm_answers(grades, rng, kind)
            read = ClassGrades.of(prepare(grades))
            for a in world.arms:
                pairs = read.arms[a.key]
                held[a.key][0] += holds(pairs, len(read.tasks))
                held[a.key][1] += holds(set_aside(pairs), len(read.tasks))
        return held

    def shares(counts: list[int]) -> str:
        return f"{_pct(counts[0] / runs)}->{_pct(counts[1] / runs).strip()}"

    arms = (*LADDER[:3], *BORDERLINE)
    print(
        f"\n{'derails set aside, 20x3, alone':38} "
        + " ".join(f"{a.true_retention:>13.2f}" for a in arms)
    )
    for name in WORLDS:
        world = replace(WORLDS[name], n_tasks=20, replicates=3, tolerance=TOLERANCE, arms=arms)
        held = tally(world, None, np.random.default_rng([seed, len(name)]))
        label = f"{name} (every answer -> rule)"
        print(f"{label:38} " + " ".join(f"{shares(held[a.key]):>13}" for a in arms))
    lossless = (replace(BORDERLINE[0], true_retention=1.0),)
    for name in ("concentrated", "noisy"):
        for kind in ANSWER_HARM:
            world = replace(
                WORLDS[name], n_tasks=20, replicates=3, tolerance=TOLERANCE, arms=lossless
            )
            held = tally(world, kind, np.random.default_rng([seed, len(name), len(kind)]))
            label = f"{name}, harm: {kind}, arm ~0.94"
            print(f"{label:46} {shares(held[lossless[0].key]):>13} (must stay <= 5%)")


def _answers(rng: np.random.Generator, quality: np.ndarray, rate: float, count: int) -> np.ndarray:
    """`count` answers per task: its quality plus noise, or a derail (0-30) at `rate`."""
    shape = (len(quality), count)
    ok = quality[:, None] + rng.normal(0, 3, shape)
    return np.where(rng.random(shape) < rate, rng.uniform(0, 30, shape), ok)


#: The designs of the paired fixed-vs-sequential comparison: a ? at 20 tasks, a ✓ at 60.
PAIRED_DESIGNS = ((20, 3), (60, 3))


def paired(
    runs: int,
    seed: int,
    processes: int = 2,
    *,
    worlds: Sequence[str] = ("concentrated", "noisy"),
    cells: Sequence[tuple[int, int]] = PAIRED_DESIGNS,
    why: bool = False,
    reanswer: bool = False,
) -> None:
    """Fixed vs sequential on the same draws, in the concentrated and noisy worlds
    (or `worlds`, at `cells`).

    Per design: how often the ladder class is published ✓, the share of the oracle's
    savings ✓ entries alone deliver (what a proxy without `--allow-provisional` applies),
    answers paid, power, the borderline arm's false application; then paired: the share of
    the fixed design's ✓ runs the sequential design also certifies, and the edge arm's
    discordant runs (applied by one design only) with an exact McNemar p-value. Then the
    noisy world's power (each arm alone, as the CEILING reads it) against the ceiling.
    With `why`, each run where one design alone certifies, and what the other one did.
    With `reanswer`, both designs re-answer where repeats disagree (behind the derail
    guard) and the same draws are read without the re-answers too (`-plain` rows); then
    per design, paired against its plain reading: the 94 % arm's and the derail-harmed 94 %
    arm's runs applied by one reading only (`tokenlens.simulate_study`)."""
    from scipy.stats import binomtest

    from tokenlens.simulate_why import tally

    chosen = {k: WORLDS[k] for k in worlds}
    study = run_study(
        chosen, cells, dict.fromkeys(cells, runs), seed=seed, processes=processes, reanswer=reanswer
    )
    print(
        f"\n{'paired world':15} {'design':>6} {'':>16} {'runs':>5} {'✓ rate':>7} "
        f"{'✓ value':>8} {'answers':>8} {'power':>7} {'alone':>7} {'false':>6}"
    )
    for name in chosen:
        for n, r in cells:
            fixed, seq = (study.cell(name, n, r, d) for d in ("fixed", "sequential"))
            plain = [study.cell(name, n, r, d) for d in PLAIN] if reanswer else []
            for t in (fixed, seq, *plain):
                print(
                    f"{name:15} {n:>3}x{r:<2} {t.design:>16} {t.runs:>5} "
                    f"{_pct(t.certified_rate):>7} {_pct(t.certified_share):>8} "
                    f"{t.answers_per_run:8.0f} {_pct(t.power):>7} {_pct(t.alone_power):>7} "
                    f"{_pct(t.false_rate):>6}"
                )
            kept = seq.certified_both / fixed.certified if fixed.certified else float("nan")
            b, c = fixed.edge_only, seq.edge_only
            p = binomtest(c, b + c, 0.5).pvalue if b + c else 1.0
            against = "against sequential" if c > b else "for sequential" if b > c else "even"
            print(
                f"PAIRED {n}x{r} {name}: sequential certifies {_pct(kept).strip()} of the runs "
                f"the fixed design does (goal >= 90%), at {seq.answers / fixed.answers:.2f} of "
                f"its answers (goal <= 0.70); edge arm (true 0.94) applied by fixed only {b}, "
                f"by sequential only {c}: McNemar p = {p:.3f} ({against})"
            )
            for design, other in ((fixed, seq), (seq, fixed)):
                if not design.certified_only:
                    continue
                causes = ", ".join(f"{k} {v}" for k, v in tally(design.certified_only).items() if v)
                print(
                    f"WHY {n}x{r} {name}: {len(design.certified_only)} runs ✓ by "
                    f"{design.design} only; {other.design}: {causes}"
                )
                for line in design.certified_only if why else ():
                    print(f"  {other.design} {line}")
            for design, base in zip((fixed, seq), plain, strict=False):
                _against_plain(design, base, n, r, name)
    if ("noisy" not in chosen) or (60, 3) not in cells:
        return
    noisy = study.cell("noisy", 60, 3, "fixed")
    print(
        f"PAIRED noisy 60x3 power (each arm alone) {_pct(noisy.alone_power).strip()} = "
        f"{_against_ceilings(noisy.alone_power, ceiling(60, 4000, seed))} (goal >= 0.80)"
    )


def _against_plain(design: CellTally, plain: CellTally, n: int, r: int, world: str) -> None:
    """One design re-answering against the same draws read without the re-answers."""
    from scipy.stats import binomtest

    for label, mine, theirs in (
        ("edge arm (true 0.94)", design.edge_runs, plain.edge_runs),
        ("derail-harmed edge arm (true 0.94)", design.derail_runs, plain.derail_runs),
    ):
        b, c = len(set(theirs) - set(mine)), len(set(mine) - set(theirs))
        p = binomtest(c, b + c, 0.5).pvalue if b + c else 1.0
        print(
            f"REANSWER {n}x{r} {world} {design.design}: {label} applied in "
            f"{_pct(len(mine) / design.runs).strip()} re-answering, "
            f"{_pct(len(theirs) / plain.runs).strip()} without; by the plain reading only {b}, "
            f"by re-answering only {c}: McNemar p = {p:.3f}; power {_pct(design.power).strip()}"
            f" against {_pct(plain.power).strip()}, ✓ {_pct(design.certified_rate).strip()} "
            f"against {_pct(plain.certified_rate).strip()}, answers "
            f"{design.answers / plain.answers:.2f} of the plain reading's"
        )


def _against_ceilings(power: float, ceil: Ceiling) -> str:
    """`power` as a share of each noiseless ceiling (`tokenlens.simulate_judge.Ceiling`)."""
    return ", ".join(
        f"{power / ceil.power(name):.2f} of the CEILING {label} {_pct(ceil.power(name)).strip()}"
        for name, label in _CEILINGS
    )


#: The ceilings' names in `Ceiling`, and how the bench's lines call them.
_CEILINGS = (
    ("rule", "rule's"),
    ("best", "best's (0.94 held in 5 %)"),
    ("at_tolerance", "best at the tolerance's (0.95 held in 5 %)"),
)


def judge_levers(
    runs: int, seed: int, processes: int = 2, names: str | None = None, derails: float = 1.0
) -> None:
    """The noisy world at 60 tasks: judge-noise levers and re-answering against the same
    money spent on repeats or tasks (`tokenlens.simulate_judge`), each arm alone, beside
    the CEILING; and each lever's edge arm with `derails` of its harm extra derails."""
    from tokenlens.simulate_judge import DERAIL_WORLD, LEVERS, LeverResult, run_levers

    levers = [v for v in LEVERS if re.search(names or "", v.name)]
    found = run_levers(
        WORLDS["noisy"], levers, runs=runs, seed=seed, processes=processes, derail_share=derails
    )
    results = [r for r in found if r.world != DERAIL_WORLD]
    derails = {(r.lever.name, r.stable_share): r for r in found if r.world == DERAIL_WORLD}

    def edge_rate(r: LeverResult) -> float:
        edge = derails.get((r.lever.name, r.stable_share))
        return edge.false_rate if edge else float("nan")

    ceil = ceiling(60, 4000, seed)
    tops = {"rule": ceil.power("rule"), "best": ceil.power("best")}
    tops["tol"] = ceil.power("at_tolerance")
    print(
        f"\n{'noisy world, 60 tasks: lever':34} {'stable':>6} {'design':>7} {'readings':>8} "
        f"{'answers':>7} {'$/class':>8} {'power':>7} {'0.94 held':>9} {'derails':>7} "
        f"{'/best':>6} {'/tol':>5} {'/rule':>5} {'power/$':>8}"
    )
    for r in results:
        lever = r.lever
        cost, per_dollar = ("—", "—")
        if not lever.bound:
            cost, per_dollar = f"{r.cost_usd:.2f}", f"{100 * r.power / r.cost_usd:.1f}%"
        print(
            f"{lever.name:34} {r.stable_share:6.1f} {lever.tasks:>4}x{lever.repeats:<2} "
            f"{r.readings_per_pair:8.2f} {r.answers_per_design:7.2f} {cost:>8} "
            f"{_pct(r.power):>7} {_pct(r.false_rate):>9} "
            f"{_pct(edge_rate(r)):>7} "
            f"{r.power / tops['best']:6.2f} {r.power / tops['tol']:5.2f} "
            f"{r.power / tops['rule']:5.2f} {per_dollar:>8}"
        )
    for share in sorted({r.stable_share for r in results}):
        mine = [r for r in results if r.stable_share == share and not r.lever.bound]
        at_60x3 = [r for r in mine if (r.lever.tasks, r.lever.repeats) == (60, 3)]
        for label, pool in ((", at 60x3", at_60x3), ("", mine)):
            held_both = [r for r in pool if max(r.false_rate, edge_rate(r)) <= 0.05]
            if not held_both:
                continue
            top = max(held_both, key=lambda r: r.power)
            print(
                f"LEVER stable share {share:.1f}{label}: most power with both edge arms held "
                f"<= 5% {top.lever.name} {_pct(top.power).strip()} = "
                f"{_against_ceilings(top.power, ceil)} (goal >= 0.80); 0.94 arm held "
                f"{_pct(top.false_rate).strip()}, harmed by derails "
                f"{_pct(edge_rate(top)).strip()}; ${top.cost_usd:.2f} a class"
            )


def simulate_study_of(
    cells: list[Scenario], runs: int, seed: int, method: IntervalMethod
) -> StudyResult:
    return study_of_arms(cells, runs=runs, seed=seed, modes=("interval",), interval_method=method)


def _designs(text: str) -> list[tuple[int, int]]:
    """`20x3,60x3` -> [(20, 3), (60, 3)]."""
    out: list[tuple[int, int]] = []
    for part in text.split(","):
        n, r = part.split("x")
        out.append((int(n), int(r)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs, two worlds: seconds")
    parser.add_argument("--runs", type=int, default=1000, help="calibrations per cell at 20x3")
    parser.add_argument("--other-runs", type=int, default=300, help="per cell elsewhere")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--worlds", help=f"comma-separated subset of {', '.join(WORLDS)}")
    parser.add_argument("--designs", help="comma-separated subset, e.g. 20x3,40x1")
    parser.add_argument(
        "--compare-intervals",
        type=int,
        default=0,
        metavar="RUNS",
        help="only compare the interval candidates, RUNS calibrations per cell",
    )
    parser.add_argument(
        "--derail-cost",
        type=int,
        default=0,
        metavar="RUNS",
        help="only measure what derailed answers cost each arm, RUNS calibrations per cell",
    )
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="RUNS",
        help="only compare fixed and sequential (✓ rates, answers, edge discordance), paired;"
        " --worlds and --designs select cells",
    )
    parser.add_argument(
        "--why",
        action="store_true",
        help="with --paired: each run certified by one design only, and what the other did",
    )
    parser.add_argument(
        "--reanswer",
        action="store_true",
        help="with --paired: both designs re-answer where repeats disagree (derail guard),"
        " against the same draws read without the re-answers",
    )
    parser.add_argument(
        "--judge-levers",
        type=int,
        default=0,
        metavar="RUNS",
        help="only compare judge-noise levers with more repeats or tasks (noisy world, 60 tasks)",
    )
    parser.add_argument("--levers", help="with --judge-levers: levers whose name matches (regex)")
    parser.add_argument(
        "--derail-share", type=float, default=1.0, help="of the derail-harmed edge arm's loss"
    )
    parser.add_argument(
        "--lone-derail",
        type=int,
        default=0,
        metavar="RUNS",
        help="only measure what setting derails aside buys and costs, RUNS calibrations per cell",
    )
    args = parser.parse_args(argv)
    if args.paired or args.judge_levers:
        start = time.perf_counter()
        if args.paired:
            paired(
                args.paired,
                args.seed,
                args.processes,
                worlds=args.worlds.split(",") if args.worlds else ("concentrated", "noisy"),
                cells=_designs(args.designs) if args.designs else PAIRED_DESIGNS,
                why=args.why,
                reanswer=args.reanswer,
            )
        if args.judge_levers:
            judge_levers(
                args.judge_levers, args.seed, args.processes, args.levers, args.derail_share
            )
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"({time.perf_counter() - start:.0f} s, load average {load:.2f})")
        return
    for runs, study in (
        (args.derail_cost, derail_cost),
        (args.lone_derail, lone_derail),
        (args.compare_intervals, compare_intervals),
    ):
        if runs:  # a side study alone
            start = time.perf_counter()
            study(runs, args.seed)
            load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            print(f"({time.perf_counter() - start:.0f} s, load average {load:.2f})")
            return

    worlds = dict(WORLDS)
    designs = list(DESIGNS)
    if args.worlds:
        worlds = {name: WORLDS[name] for name in args.worlds.split(",")}
    if args.designs:
        designs = _designs(args.designs)
    runs_for = {d: (args.runs if d == (20, 3) else args.other_runs) for d in designs}
    if args.quick:
        worlds = {k: worlds[k] for k in ("concentrated", "noisy")}
        designs = [(20, 3)]
        runs_for = {(20, 3): 3}
        args.processes = 1
    for name, w in worlds.items():
        print(
            f"{name}: harm {w.harm}, judge sd {w.judge_sd}, sampling sd {w.sampling_sd}, "
            f"grades in steps of {w.grade_step}, derail {w.derail:.1%}, errors "
            f"{w.error_rate:.0%}, missing {w.missing_rate:.0%}, hard share {w.hard_share}, "
            f"hurt ratio {w.hurt_ratio}, task loss {w.task_loss}"
        )
    start = time.perf_counter()
    study = run_study(worlds, designs, runs_for, seed=args.seed, processes=args.processes)
    elapsed = time.perf_counter() - start
    print(
        f"\n{'world':15} {'design':>6} {'':>10} {'runs':>5} {'false applied [95% CI]':<26} "
        f"{'power':>7} {'alone':>7} {'savings':>8} {'calls':>7}"
    )
    cells = [
        study.cell(w, n, r, d) for w in worlds for n, r in designs for d in ("fixed", "sequential")
    ]
    for t in cells:
        print(_row(t))
    worst = max(cells, key=lambda t: t.false_rate)
    print(
        f"\nSUMMARY worst false application: {_pct(worst.false_rate).strip()} "
        f"[{_pct(worst.false_ci[0]).strip()}, {_pct(worst.false_ci[1]).strip()}] "
        f"({worst.world} {worst.tasks}x{worst.repeats} {worst.design}; goal <= 5%)"
    )
    for t in cells:
        if (t.tasks, t.repeats) == (20, 3):
            print(
                f"SUMMARY 20x3 {t.world} {t.design}: power {_pct(t.power).strip()} (goal >= 70%), "
                f"savings {_pct(t.savings_share).strip()} of the oracle's (goal >= 80%), "
                f"{t.calls_per_run:.0f} calls"
            )
    if not args.quick:
        for n in (20, 40, 60):  # 60: what a ✓ needs
            ceil = ceiling(n, 4000, args.seed)
            for name, label in _CEILINGS:
                held = getattr(ceil, name)
                print(
                    f"CEILING {n} tasks, concentrated harm read without noise, {label[:-2]}: "
                    f"0.95 held {_pct(held[CEILING_TOLERANCE]).strip()}, 0.94 held "
                    f"{_pct(held[0.94]).strip()}, power {_pct(ceil.power(name)).strip()} "
                    f"(0.97: {_pct(held[0.97]).strip()}, 0.99: {_pct(held[0.99]).strip()})"
                )
    else:
        derail_cost(4, args.seed)  # every code path, in a second
        lone_derail(4, args.seed)
        judge_levers(2, args.seed, 1, "one reading|re-answer, derail guard")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"({elapsed:.0f} s, {args.processes} processes, load average {load:.2f})")


if __name__ == "__main__":
    main()

"""Re-answering where a task's repeats disagree, and the derail guard that keeps it honest.

Why: with a noisy judge most of what keeps a good arm from clearing is the wobble of a
few cells — a derailed answer, a reading far off its repeats. Paying more answers for
those cells only (every answer counted in the mean) was the cheapest power lever the
judge-noise simulation found (`tokenlens.simulate_judge`, bench/bench_simulation.py
`--judge-levers`; figures in docs/benchmarks.md). But more answers where derails were
seen dilute those derails, and a compressor whose harm *is* extra derails would be
diluted with them: so an arm whose compressed answers derailed more often than the
control's second answers on the planned repeats is read on its planned repeats alone.

One place for the rule: the calibration (`tokenlens.calibration.stage_reanswer`) and the
simulation (`tokenlens.simulate_judge`) both call these functions.
"""

from __future__ import annotations

import pandas as pd

from tokenlens.compress.arms import CONTROL
from tokenlens.decision.derails import DERAILED, KEPT

#: A cell whose first-judgement grades spread by more than this many points across its
#: repeats (its cleartext grades, or its second answers' grades) is re-answered ...
REANSWER_SPREAD = 20.0
#: ... with this many more replicates (each with a fresh cleartext answer).
REANSWER_COUNT = 3
#: One-sided binomial p below which an arm's excess derails make it read on its planned
#: repeats alone. 0.5 rather than a usual 0.05: the test only decides which reading of the
#: arm counts, and the stricter reading costs a harmless arm little (noisy world, 60 x 3,
#: 400 runs, the control re-answered too: power 63.5 % at 0.5 against 65.6 % at 0.2, and
#: a derail-harmed edge arm applied in 0.3 / 3.0 % against 1.5 / 4.3 %).
DERAIL_GUARD = 0.5

#: A cell of the grades table: (task class, task id, arm).
Cell = tuple[str, str, str]


def _first_judgement(grades: pd.DataFrame, judge: str | None) -> pd.DataFrame:
    """The deciding judge's first judgements (`judge` None: the table's only judge)."""
    rows = grades
    if "judge_pass" in rows.columns:
        rows = rows[rows["judge_pass"].fillna(0).astype(int) == 0]
    if "judge" in rows.columns:
        judges = sorted(rows["judge"].dropna().unique().tolist())
        if judge is None and len(judges) > 1:
            raise ValueError(f"grades table holds judges {judges}; say which one decides")
        if judge is not None:
            rows = rows[rows["judge"] == judge]
    if "error" in rows.columns:
        rows = rows[rows["error"].isna()]
    return rows


def cells_to_reanswer(
    grades: pd.DataFrame,
    repeats: int,
    *,
    spread: float = REANSWER_SPREAD,
    judge: str | None = None,
) -> list[Cell]:
    """The arms' cells whose planned repeats disagree: their cleartext grades or their
    compressed grades spread by more than `spread` points. Only the first judgements of
    replicates below `repeats` are read; in table order.

    Never the control's: its noise floor is read over its pairs, so a re-answered control
    task would count twice there — and those are its noisiest tasks. In the simulated noisy
    world re-answering the control too read the floor higher (mean 6.14 -> 6.32 %) and
    halved the runs that could certify (9.2 -> 4.5-5.0 % at 60 x 3). Left alone, the floor
    reads exactly what the planned design reads."""
    rows = _first_judgement(grades, judge)
    rows = rows[(rows["replicate"].astype(int) < repeats) & (rows["arm"] != CONTROL)]
    keys = ["task_class", "task_id", "arm"]
    cols = rows[[*keys, "grade_clear", "grade_comp"]].copy()
    for col in ("grade_clear", "grade_comp"):
        cols[col] = pd.to_numeric(cols[col], errors="coerce")
    by_cell = cols.groupby(keys, sort=False)[["grade_clear", "grade_comp"]]
    spreads = by_cell.max() - by_cell.min()  # NaN-skipping; one reading spreads 0
    loud = (spreads["grade_clear"] > spread) | (spreads["grade_comp"] > spread)
    return [(str(c), str(t), str(a)) for c, t, a in spreads.index[loud.to_numpy()]]


def guarded_arms(
    grades: pd.DataFrame,
    repeats: int,
    *,
    guard: float = DERAIL_GUARD,
    judge: str | None = None,
) -> dict[str, set[str]]:
    """Per class, the arms whose compressed answers derailed significantly more often
    (one-sided binomial p below `guard`) than the control's second answers, on the planned
    repeats (replicates below `repeats`). A derail is a lone reading: below `DERAILED` of
    its cleartext answer's grade while the task's median repeat keeps `KEPT` of it (a task
    hurt in every repeat is the prompt's harm, which re-answering does not dilute)."""
    from scipy.stats import binomtest

    rows = _first_judgement(grades, judge)
    comp = pd.to_numeric(rows["grade_comp"], errors="coerce")
    clear = pd.to_numeric(rows["grade_clear"], errors="coerce")
    planned = rows[(rows["replicate"].astype(int) < repeats) & comp.notna() & (clear > 0)]
    ratio = comp[planned.index] / clear[planned.index]
    keys = [planned["task_class"], planned["arm"], planned["task_id"]]
    median = ratio.groupby(keys).transform("median")
    lone = (
        ((ratio < DERAILED) & (median >= KEPT))
        .groupby([planned["task_class"], planned["arm"]])
        .sum()
    )
    counts = {(str(c), str(a)): int(n) for (c, a), n in lone.items()}
    found: dict[str, set[str]] = {}
    for (task_class, arm), mine in counts.items():
        control = counts.get((task_class, CONTROL), 0)
        if arm == CONTROL or mine + control == 0:
            continue
        if binomtest(mine, mine + control, 0.5, alternative="greater").pvalue < guard:
            found.setdefault(task_class, set()).add(arm)
    return found


def read_with_guard(
    grades: pd.DataFrame,
    repeats: int,
    *,
    guard: float = DERAIL_GUARD,
    judge: str | None = None,
) -> tuple[pd.DataFrame, dict[str, set[str]]]:
    """The grades the curve is read from — every row, but a guarded arm's (`guarded_arms`)
    only on its planned repeats — and the guarded arms, per class."""
    guarded = guarded_arms(grades, repeats, guard=guard, judge=judge)
    drop = pd.Series(False, index=grades.index)
    if guarded:
        extra = grades["replicate"].astype(int) >= repeats
        for task_class, arms in guarded.items():
            drop |= extra & (grades["task_class"] == task_class) & grades["arm"].isin(arms)
    return grades[~drop], guarded

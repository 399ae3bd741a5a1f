"""Derailed answers set aside before an arm's bound, where they cannot be compression's harm.

Why: an answer model now and then derails — one sampled answer collapses (a refusal, a
loop, a cut-off) whatever its prompt was. At 20 tasks x 3 repeats a single derailed
compressed answer reads like one badly hurt task, and a lossless arm failed its bound
about half the time for it (docs/decision-rule.md). Compression's harm, by contrast, is
in the prompt: it hurts *every* repeat of a task, or shows as extra derails across tasks.

So, per arm, two kinds of reading are set aside:

1. **uncompressed derails** — a pair whose uncompressed reference (the cleartext and the
   control's answers of that task and repeat) sits far below the same task's other
   repeats, which agree with each other. Those answers never saw a compressed prompt, so
   dropping the pair is a random drop as far as compression is concerned; keeping it
   only lets the compressed answer read above 100 %.
2. **one lone compressed derail** — a compressed reading below half its reference while
   the task's other (at least two) repeats keep >= 80 % of theirs. Only when the arm has
   exactly one: two or more may be compression making answers derail, and are all kept.

Measured, not assumed (a scratch study on `tokenlens.simulate`'s worlds, each arm alone
at 20 x 3, 2,000 calibrations per world; `bench/bench_simulation.py --lone-derail` repeats
it): a lossless arm is held 47-77 % of the time instead of 36-53 %, and an arm at true
0.94 against a 0.95 tolerance is applied in at most 4.2 % — also where compression's only
harm is extra derails or per-answer losses (3.8 % and 3.4 %).
Forgiving two lone derails applied that arm in 10.6 % where harm is extra derails; the
compressed side alone (without step 1) in 5.1 % with a noisy judge. A task with a single
repeat has nothing to compare with, and an arm with `MAX_TASKS` tasks or more does better
reading every answer: nothing is set aside there.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from tokenlens.decision.grades import ArmPairs

#: A compressed reading below this share of its reference looks derailed ...
DERAILED = 0.5
#: ... when the task's other repeats of the arm keep at least this share of theirs.
KEPT = 0.8
#: An uncompressed reference below this share of its task's other references (which are
#: all within KEPT of their median) holds a derailed uncompressed answer: one derailed
#: answer of the two it averages pulls it to about 0.55-0.6 of the others.
REFERENCE_LOW = 0.6
#: Repeats a task needs before any of its readings can be told apart from the others.
MIN_REPEATS = 3
#: From this many tasks on, nothing is set aside: one derailed answer then moves the mean
#: by less than 0.6 points, which the skew-corrected bound absorbs, and setting the
#: uncompressed derails aside costs a lossless arm more than forgiving one compressed
#: derail gives it back (at 40 x 3, each arm alone, 1,000 runs a world: held 77 / 74 / 47 %
#: instead of 84 / 79 / 61 % reading every answer).
MAX_TASKS = 40


def set_aside(pairs: ArmPairs) -> ArmPairs:
    """`pairs` without its uncompressed derails and its one lone compressed derail (at
    fewer than `MAX_TASKS` tasks; from there on, `pairs` as they are)."""
    if np.unique(pairs.task).size >= MAX_TASKS:
        return pairs
    return _without_lone_compressed_derail(_without_uncompressed_derails(pairs))


def _without_uncompressed_derails(pairs: ArmPairs) -> ArmPairs:
    if pairs.n_pairs < MIN_REPEATS:
        return pairs
    # one row per task, its references in columns (NaN-padded): a task has a few repeats,
    # so "every other repeat" is one masked column at a time, vectorised over tasks
    order = np.argsort(pairs.task, kind="stable")
    task = pairs.task[order]
    starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]])
    sizes = np.diff(np.r_[starts, task.size])
    row = np.repeat(np.arange(starts.size), sizes)
    col = np.arange(task.size) - starts[row]
    grid = np.full((starts.size, int(sizes.max())), np.nan)
    grid[row, col] = pairs.reference[order]
    drop = np.zeros(pairs.n_pairs, dtype=bool)
    for j in range(grid.shape[1]):
        rest = grid.copy()
        rest[:, j] = np.nan
        enough = np.sum(~np.isnan(rest), axis=1) >= MIN_REPEATS - 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: too few anyway
            middle = np.nanmedian(rest, axis=1)
        with np.errstate(invalid="ignore"):
            agree = np.all(np.isnan(rest) | (rest >= KEPT * middle[:, None]), axis=1)
            low = grid[:, j] < REFERENCE_LOW * middle
        at = (col == j) & (enough & agree & low)[row]
        drop[order[at]] = True
    return _keep(pairs, ~drop)


def _without_lone_compressed_derail(pairs: ArmPairs) -> ArmPairs:
    if pairs.n_pairs < MIN_REPEATS:
        return pairs
    kept = pairs.comp / np.maximum(pairs.reference, 1e-9)
    repeats = np.bincount(pairs.task)[pairs.task]
    fine = np.bincount(pairs.task, weights=kept >= KEPT)[pairs.task]
    lone = np.flatnonzero((kept < DERAILED) & (repeats >= MIN_REPEATS) & (fine == repeats - 1))
    if lone.size != 1:
        return pairs
    return _keep(pairs, np.arange(pairs.n_pairs) != lone[0])


def _keep(pairs: ArmPairs, keep: np.ndarray) -> ArmPairs:
    if keep.all():
        return pairs
    return replace(
        pairs,
        task=pairs.task[keep],
        comp=pairs.comp[keep],
        clear=pairs.clear[keep],
        reference=pairs.reference[keep],
        capped=pairs.capped[keep],
    )

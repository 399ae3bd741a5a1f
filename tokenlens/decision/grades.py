"""The grades table, checked and turned into per-class arrays the estimators read.

Why a module of its own: every rule downstream trusts three things decided here — which
rows count (a valid first judgement with a non-zero cleartext grade), which arm names
are real (the same set `decide` can turn into policy entries), and how an arm's pair is
matched with the control pair of the same task and replicate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import pandas as pd

from tokenlens.compress.arms import CONTROL, Arm
from tokenlens.errors import JudgeError, TokenLensError
from tokenlens.stats import retention

Mode = Literal["interval", "mean"]
MODES: tuple[str, ...] = get_args(Mode)

REQUIRED = (
    "task_id",
    "task_class",
    "arm",
    "method",
    "rate",
    "replicate",
    "judge",
    "grade_clear",
    "grade_comp",
    "reduction",
)


def check_mode(mode: str) -> Mode:
    """The mode itself, or a ValueError naming the choices (never a silent fallback)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode  # type: ignore[return-value]


def check_arms(arms: pd.Series) -> None:
    """Every arm name must parse as an Arm (or be the control): what `decide` can publish."""
    bad: list[str] = []
    for name in sorted(set(arms.astype(str))):
        if name == CONTROL:
            continue
        try:
            Arm.parse(name)
        except ValueError:
            bad.append(name)
    if bad:
        raise TokenLensError(
            f"grades table: arm name(s) {', '.join(map(repr, bad))} are not arms "
            "(expected e.g. 'safe', 'prune@0.6' or 'control')"
        )


def prepare(grades: pd.DataFrame) -> pd.DataFrame:
    """Checked copy with flags: valid (graded), broken (cleartext 0), usable (a ratio)."""
    missing = [c for c in REQUIRED if c not in grades.columns]
    if missing:
        raise TokenLensError(f"grades table: missing column(s) {', '.join(missing)}")
    check_arms(grades["arm"])
    df = grades.copy()
    if "error" not in df.columns:
        df["error"] = None
    if "judge_pass" not in df.columns:
        df["judge_pass"] = 0
    df["judge_pass"] = df["judge_pass"].fillna(0).astype(int)
    for col in ("grade_clear", "grade_comp", "reduction", "rate"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    has_grades = df["grade_clear"].notna() & df["grade_comp"].notna()
    df["valid"] = df["error"].isna() & has_grades
    out_of_range = df["valid"] & (
        ~df["grade_clear"].between(0, 100) | ~df["grade_comp"].between(0, 100)
    )
    if out_of_range.any():
        row = df[out_of_range].iloc[0]
        raise JudgeError(
            f"grades table: task {row['task_id']} arm {row['arm']} replicate "
            f"{row['replicate']} has grades {row['grade_clear']}/{row['grade_comp']} "
            "outside 0-100 (a bad grade must be an error row, not a number)"
        )
    df["broken"] = df["valid"] & (df["grade_clear"] == 0)
    df["usable"] = df["valid"] & (df["grade_clear"] > 0)
    df["ret_cap"] = retention(df["grade_comp"], df["grade_clear"])
    df["ret_raw"] = retention(df["grade_comp"], df["grade_clear"], cap=False)
    return df


def pick_judge(df: pd.DataFrame, judge: str | None) -> tuple[pd.DataFrame, str]:
    judges = sorted(df["judge"].dropna().unique().tolist())
    if judge is None:
        if len(judges) != 1:
            raise JudgeError(
                f"grades table holds judges {judges}; say which one decides "
                "(aggregate(..., judge=...))"
            )
        judge = judges[0]
    elif judge not in judges:
        raise JudgeError(f"grades table has no rows from judge {judge!r} (has: {judges})")
    return df[df["judge"] == judge], judge


@dataclass(frozen=True)
class ArmPairs:
    """One arm's usable first-judgement pairs in one class, as aligned arrays.

    `reference` is the mean uncompressed reading of the pair's task and replicate (see
    `tokenlens.stats`, pooled retention): ((clear here + clear in the control call) / 2 +
    the control's second answer) / 2 when the control pair exists, else the clear grade.
    """

    task: np.ndarray  # task index per pair (into `ClassGrades.tasks`)
    comp: np.ndarray
    clear: np.ndarray
    reference: np.ndarray
    capped: np.ndarray
    n_errors: int
    n_broken: int
    reduction: float
    method: str
    rate: float | None
    #: (fabricated lines, unmarked drops, facts lost) of its compressed tool outputs,
    #: summed over the class's tasks (each task's compression counted once).
    fidelity: tuple[int, int, int] = (0, 0, 0)

    @property
    def faithful(self) -> bool:
        return self.fidelity[0] == 0 and self.fidelity[1] == 0

    @property
    def n_pairs(self) -> int:
        return int(self.task.size)

    def per_task(self, values: np.ndarray, n_tasks: int) -> np.ndarray:
        return np.bincount(self.task, weights=values, minlength=n_tasks).astype(float)

    def counts(self, n_tasks: int) -> np.ndarray:
        return np.bincount(self.task, minlength=n_tasks).astype(float)


@dataclass(frozen=True)
class ClassGrades:
    """Every arm's pairs of one class, control included, over one task index."""

    tasks: list[str]
    arms: dict[str, ArmPairs]

    @classmethod
    def of(cls, df: pd.DataFrame) -> ClassGrades:
        """Numpy over the whole class at once: per-arm pandas indexing costs ~20x more,
        and the simulation study aggregates thousands of tables."""
        first = df["judge_pass"].to_numpy(int) == 0
        task_ids = df["task_id"].astype(str).to_numpy()
        tasks = sorted(set(task_ids[first].tolist()))
        code = np.searchsorted(np.array(tasks, dtype=object), task_ids) if tasks else task_ids
        arm = df["arm"].astype(str).to_numpy()
        rep = df["replicate"].to_numpy(int)
        usable = df["usable"].to_numpy(bool)
        valid = df["valid"].to_numpy(bool)
        broken = df["broken"].to_numpy(bool)
        clear_all = df["grade_clear"].to_numpy(float)
        comp_all = df["grade_comp"].to_numpy(float)
        capped_all = df["ret_cap"].to_numpy(float)
        red_all = df["reduction"].to_numpy(float)
        rate_all = df["rate"].to_numpy(float)
        method_all = df["method"].astype(str).to_numpy()
        n_tasks, n_reps = len(tasks), int(rep.max()) + 1 if rep.size else 1
        ctrl = first & (arm == CONTROL) & usable
        cell = np.where(first, code, 0).astype(int) * n_reps + rep
        size = max(n_tasks * n_reps, 1)
        k_n = np.bincount(cell[ctrl], minlength=size).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            k_mean = np.bincount(cell[ctrl], clear_all[ctrl], minlength=size) / k_n
            s_mean = np.bincount(cell[ctrl], comp_all[ctrl], minlength=size) / k_n
        arms: dict[str, ArmPairs] = {}
        for arm_key in sorted(set(arm[first].tolist())):
            rows = first & (arm == arm_key)
            use = rows & usable
            clear = clear_all[use]
            if arm_key == CONTROL:
                reference = clear.copy()
            else:
                c = cell[use]
                has = k_n[c] > 0
                reference = np.where(has, ((clear + k_mean[c]) / 2 + s_mean[c]) / 2, clear)
            has_red = rows & ~np.isnan(red_all)
            red_n = np.bincount(code[has_red].astype(int), minlength=n_tasks)
            red_sum = np.bincount(code[has_red].astype(int), red_all[has_red], minlength=n_tasks)
            seen = red_n > 0
            index = int(np.flatnonzero(rows)[0])
            rate = float(rate_all[index])
            arms[arm_key] = ArmPairs(
                task=code[use].astype(int),
                comp=comp_all[use],
                clear=clear,
                reference=reference,
                capped=capped_all[use],
                n_errors=int((rows & ~valid).sum()),
                n_broken=int((rows & broken).sum()),
                reduction=float(np.mean(red_sum[seen] / red_n[seen])) if seen.any() else math.nan,
                method=str(method_all[index]),
                rate=None if math.isnan(rate) else rate,
                fidelity=_fidelity(df, rows),
            )
        return cls(tasks, arms)


#: The fidelity columns of the grades table (`tokenlens.tables.GradeRow`), in order.
FIDELITY_COLUMNS = ("fabricated_lines", "unmarked_drops", "facts_lost")


def _fidelity(df: pd.DataFrame, rows: np.ndarray) -> tuple[int, int, int]:
    """An arm's fidelity counts: each task's compression once (its replicates repeat it)."""
    if not all(col in df.columns for col in FIDELITY_COLUMNS) or not rows.any():
        return (0, 0, 0)
    mine = df.loc[rows, ["task_id", *FIDELITY_COLUMNS]]
    per_task = mine.groupby("task_id")[list(FIDELITY_COLUMNS)].max()
    totals = per_task.apply(pd.to_numeric, errors="coerce").fillna(0).sum()
    return (int(totals.iloc[0]), int(totals.iloc[1]), int(totals.iloc[2]))

"""The grades table, checked and turned into per-class arrays the estimators read.

Why a module of its own: every rule downstream trusts three things decided here — which
rows count (a valid first judgement with a non-zero cleartext grade), which arm names
are real (the same set `decide` can turn into policy entries), and how an arm's pair is
matched with the control pair of the same task and replicate.
"""

from __future__ import annotations

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
        first = df[df["judge_pass"] == 0]
        tasks = sorted(set(first["task_id"].astype(str)))
        index = {t: i for i, t in enumerate(tasks)}
        ctrl = first[(first["arm"] == CONTROL) & first["usable"]]
        ctrl_keyed = ctrl.groupby(["task_id", "replicate"])[["grade_clear", "grade_comp"]].mean()
        arms: dict[str, ArmPairs] = {}
        for arm_key, rows in first.groupby("arm", sort=True):
            usable = rows[rows["usable"]]
            clear = usable["grade_clear"].to_numpy(float)
            if arm_key == CONTROL or ctrl_keyed.empty:
                reference = clear.copy()
            else:
                keys = pd.MultiIndex.from_arrays([usable["task_id"], usable["replicate"]])
                matched = ctrl_keyed.reindex(keys)
                k = matched["grade_clear"].to_numpy(float)
                s = matched["grade_comp"].to_numpy(float)
                reference = np.where(np.isnan(k), clear, ((clear + k) / 2 + s) / 2)
            with_red = rows[rows["reduction"].notna()]
            per_task_red = with_red.groupby("task_id")["reduction"].mean()
            rate = float(rows["rate"].iloc[0])
            arms[str(arm_key)] = ArmPairs(
                task=np.array([index[str(t)] for t in usable["task_id"]], dtype=int),
                comp=usable["grade_comp"].to_numpy(float),
                clear=clear,
                reference=reference,
                capped=usable["ret_cap"].to_numpy(float),
                n_errors=int((~rows["valid"]).sum()),
                n_broken=int(rows["broken"].sum()),
                reduction=float(per_task_red.mean()) if len(per_task_red) else float("nan"),
                method=str(rows["method"].iloc[0]),
                rate=None if np.isnan(rate) else rate,
            )
        return cls(tasks, arms)

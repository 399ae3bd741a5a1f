"""Which answers and judge pairs a calibration needs, as plain data.

Per task and replicate ``r``:

* sample 0 — the cleartext answer (the baseline every pair of that replicate shares);
* sample 1 — the second answer: a compressed answer per arm, and a second cleartext
  answer for the control arm.

The two answers of every pair are therefore drawn the same way, and the only thing that
differs between an arm's pair and the control's pair is the compression. The seed of a
sample is derived from (run seed, replicate, sample); it enters the ledger key, so repeats
and the control's second sample are distinct calls even where the backend ignores seeds.
An arm whose compressed body equals the cleartext body sends exactly the control's second
request, and shares its answer: that is the same call, and it is paid once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

CLEAR = "clear"  # the `arm` of a sample-0 answer row
BASELINE_SAMPLE = 0
SECOND_SAMPLE = 1


def sample_seed(base_seed: int, replicate: int, sample: int) -> int:
    """A 31-bit seed for one (replicate, sample) of a run; distinct for distinct pairs."""
    digest = hashlib.sha256(f"tokenlens-seed:{base_seed}:{replicate}:{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass(frozen=True)
class AnswerCell:
    """One answer to obtain: `arm` is CLEAR for the baseline, else an arm key or "control"."""

    task_id: str
    arm: str
    replicate: int
    sample: int


@dataclass(frozen=True)
class PairCell:
    """One judged pair: the replicate's baseline answer vs the arm's second answer."""

    task_id: str
    arm: str
    replicate: int

    @property
    def case_key(self) -> str:
        """Stable id of the case; the blind judge derives the A/B position from it."""
        return f"{self.task_id}|{self.arm}|r{self.replicate}"

    @property
    def baseline(self) -> AnswerCell:
        return AnswerCell(self.task_id, CLEAR, self.replicate, BASELINE_SAMPLE)

    @property
    def second(self) -> AnswerCell:
        return AnswerCell(self.task_id, self.arm, self.replicate, SECOND_SAMPLE)


def answer_cells(task_ids: list[str], arms: list[str], repeats: int) -> list[AnswerCell]:
    """Every answer a run needs: baseline + one second answer per arm (control included)."""
    cells: list[AnswerCell] = []
    for task_id in task_ids:
        for replicate in range(repeats):
            cells.append(AnswerCell(task_id, CLEAR, replicate, BASELINE_SAMPLE))
            cells.extend(AnswerCell(task_id, arm, replicate, SECOND_SAMPLE) for arm in arms)
    return cells


def pair_cells(task_ids: list[str], arms: list[str], repeats: int) -> list[PairCell]:
    """Every pair to judge: one per (task, arm, replicate), control included."""
    return [
        PairCell(task_id, arm, replicate)
        for task_id in task_ids
        for replicate in range(repeats)
        for arm in arms
    ]

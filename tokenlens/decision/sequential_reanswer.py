"""Re-answering in the sequential design (`SequentialSettings.reanswer`).

The fixed design re-answers after all its planned repeats are judged
(`tokenlens.calibration.stage_reanswer`); the sequential loop does the same per arm, at
the arm's last look — the only look where its cells hold all `max_repeats` planned
repeats (the control is never re-answered). There the cells whose repeats disagree
(`tokenlens.decision.reanswer.cells_to_reanswer`) are asked for `REANSWER_COUNT` more
replicates in the next round, once, and the arm is read only when they are in: its last
look reads the planned repeats and the re-answers together, so re-answering adds no look
(no extra spending of the error). Every look reads the grades through `read_with_guard`,
so an arm whose compressed answers derailed more often than the control's is read on its
planned repeats alone, as in the fixed design.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from tokenlens.decision.reanswer import REANSWER_COUNT, cells_to_reanswer, read_with_guard

#: (task class, arm, task id, replicate): the fields of `sequential.Cell`, in its order.
ExtraCell = tuple[str, str, str, int]


@dataclass
class Reanswers:
    """Which cells were re-answered (never twice) and which wait to be asked."""

    repeats: int
    judge: str | None = None
    #: Off: nothing is held back or asked, and every row is read.
    on: bool = True
    #: (task class, task id, arm) of every cell queued for re-answering so far.
    queued: set[tuple[str, str, str]] = field(default_factory=set)
    waiting: list[ExtraCell] = field(default_factory=list)

    def hold_back(
        self, arms: Sequence[str], grades: pd.DataFrame, last_look: Callable[[str], bool]
    ) -> list[str]:
        """The arms to read this round. The disagreeing cells of the arms at their last
        look are queued for re-answering (each cell once), and those arms wait for them."""
        last = [a for a in arms if last_look(a)]
        if not self.on or not last or grades.empty:
            return list(arms)
        new = [
            cell
            for cell in cells_to_reanswer(
                grades[grades["arm"].isin(last)], self.repeats, judge=self.judge
            )
            if cell not in self.queued
        ]
        self.queued.update(new)
        self.waiting.extend(
            (c, a, t, r)
            for c, t, a in new
            for r in range(self.repeats, self.repeats + REANSWER_COUNT)
        )
        waiting = {a for _, _, a in new}
        return [a for a in arms if a not in waiting]

    def take(self) -> list[ExtraCell]:
        """The re-answers to ask in this round (each only once)."""
        out, self.waiting = self.waiting, []
        return out

    def read(self, grades: pd.DataFrame) -> pd.DataFrame:
        """The rows a look reads: a guarded arm's re-answers left out (`read_with_guard`).
        `SequentialResult.grades` holds every row paid; its curve reads these."""
        if (
            not self.on
            or grades.empty
            or not (grades["replicate"].astype(int) >= self.repeats).any()
        ):
            return grades
        return read_with_guard(grades, self.repeats, judge=self.judge)[0]

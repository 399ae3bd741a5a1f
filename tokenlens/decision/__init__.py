"""From judged pairs to a policy: one module per job.

- `grades`: check the grades table, turn it into per-class arrays
- `evidence`: how many tasks a verdict needs (minimum evidence)
- `ladder`: the walk (gentlest first, stop at the first failure)
- `curve`: `aggregate` — estimates, floors and the walk per class
- `verdicts`: `decide` — the policy and the words behind each entry; exit codes
- `planner`: tasks and repeats a design needs to certify an arm, and what it costs
- `agreement`: two judges compared
"""

from tokenlens.decision.agreement import JudgeAgreement, judge_agreement
from tokenlens.decision.curve import ALL_CLASSES, ALPHA, MAX_NOISE_FLOOR, Curve, aggregate
from tokenlens.decision.evidence import tasks_for_measured, tasks_for_provisional
from tokenlens.decision.grades import MODES, Mode, check_mode
from tokenlens.decision.ladder import MIN_REDUCTION, Rung, Walk, walk_ladder
from tokenlens.decision.verdicts import (
    EXIT_OK,
    EXIT_UNRESOLVED,
    decide,
    exit_code,
    unresolved_classes,
)

__all__ = [
    "ALL_CLASSES",
    "ALPHA",
    "EXIT_OK",
    "EXIT_UNRESOLVED",
    "MAX_NOISE_FLOOR",
    "MIN_REDUCTION",
    "MODES",
    "Curve",
    "JudgeAgreement",
    "Mode",
    "Rung",
    "Walk",
    "aggregate",
    "check_mode",
    "decide",
    "exit_code",
    "judge_agreement",
    "tasks_for_measured",
    "tasks_for_provisional",
    "unresolved_classes",
    "walk_ladder",
]

"""Minimum evidence: how many tasks a verdict needs before it may claim anything.

No interval can see harm that is not in the sample. If compression wrecks a share p of
a class's tasks and leaves the rest alone, n tasks miss every wrecked one with
probability (1 - p)^n, which is about 5 % when p = 3/n: harm confined to fewer than
about 3/n of the tasks is invisible. So the tasks needed follow from the tolerance:

* ✓ (measured) claims the loss is within tolerance even if the harm is concentrated in
  tasks that lose *everything*. Such harm exceeds the tolerance once it touches a share
  1 - tolerance of the tasks, so ✓ needs 3 / (1 - tolerance) tasks (60 at 95 %).
* ? (provisional) claims it against harm of a *typical* size: a task that compression
  hurts badly loses about a third of its grade (`TYPICAL_TASK_LOSS`), so such harm needs
  a share 3 (1 - tolerance) of the tasks and n >= 1 / (1 - tolerance) (20 at 95 %).
* Below that, nothing is applied and the verdict says how many tasks it needs.

These hold in `--mode interval`; `--mode mean` is the seed's rule, kept for comparison.
"""

from __future__ import annotations

import math

#: Harm a task must show to be "hurt badly" in the provisional rule (fraction of grade).
TYPICAL_TASK_LOSS = 1 / 3
#: Chance of missing every hurt task that the rules accept (e^-3 ≈ 0.05).
MISS_EXPONENT = 3.0


#: What "needs" says for a 100 % tolerance: no finite sample rules out every loss.
UNREACHABLE = 10**9


def _needed(tolerance: float, task_loss: float) -> int:
    margin = 1.0 - tolerance
    if margin <= 1e-9:
        return UNREACHABLE
    return max(2, math.ceil(MISS_EXPONENT * task_loss / margin - 1e-9))


def tasks_for_measured(tolerance: float) -> int:
    """Tasks a ✓ needs: harm concentrated in tasks that lose everything is ruled out."""
    return _needed(tolerance, 1.0)


def tasks_for_provisional(tolerance: float) -> int:
    """Tasks a ? needs: harm concentrated in tasks that lose about a third is ruled out."""
    return _needed(tolerance, TYPICAL_TASK_LOSS)

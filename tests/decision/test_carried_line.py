"""A carried-over entry's policy line says "carried over" once, and nothing of the old
run's walk (its "ignored after the first failure" was about that night's arms)."""

from __future__ import annotations

from datetime import timedelta

from tests.decision.test_carryover import MONDAY, WEEK, certified, policy
from tokenlens.decision.carryover import carry_everything, stamp
from tokenlens.report import seed_lines


def test_a_carried_provisional_line_says_it_once_without_the_old_walk() -> None:
    provisional = certified("extraction").model_copy(
        update={
            "verdict": "provisional",
            "reason": "provisional — held, but ruling out harm needs ≥ 60 tasks for a ✓",
            "ignored_arms": ("select@0.4",),
        }
    )
    good = stamp(policy(MONDAY, "run-monday", {"extraction": provisional}), WEEK)
    tuesday = MONDAY + timedelta(days=1)
    carried = carry_everything(
        good, why="run stopped unmeasured: outage", run_id="run-tuesday", max_age=WEEK, now=tuesday
    )
    entry = carried.classes["extraction"]
    assert entry.carried_over is not None and entry.ignored_arms == ()
    lines = seed_lines(carried)
    start = next(i for i, line in enumerate(lines) if "extraction" in line)
    rest = [line.startswith(" ") for line in lines[start + 1 :]]
    own = lines[start : start + 1 + (rest.index(False) if False in rest else len(rest))]
    text = "\n".join(own)
    assert text.lower().count("carried over") == 1, text
    assert "ignored after the first failure" not in text
    assert text.endswith("this run could not measure the class — run stopped unmeasured: outage")

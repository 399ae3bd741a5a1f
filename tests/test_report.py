"""The human report: seed-style lines, tables, plot, escaping, banner, self-containment."""

from __future__ import annotations

import re

import pandas as pd

from tests.grade_tables import cell, frame, realistic, uniform
from tokenlens.decision import aggregate, decide, judge_agreement
from tokenlens.formatting import PANE_WIDTH
from tokenlens.report import LOCAL_MODEL_BANNER, outcome_lines, seed_lines, write_report


def _built(grades: pd.DataFrame, judge: str | None = None):
    curve = aggregate(grades, tolerance=0.95, judge=judge)
    return curve, decide(curve, calibration_id="report-test-0001", model="tiny-local")


def test_seed_style_lines() -> None:
    _, policy = _built(realistic())
    lines = seed_lines(policy)
    extraction = next(line for line in lines if " extraction " in line)
    assert re.fullmatch(
        r"✓ extraction\s+llmlingua2 rate=0\.8  \d+\.\d% smaller at \d+\.\d% quality", extraction
    )
    summ = next(line for line in lines if " summarization " in line)
    assert summ.startswith("— summarization") and "none — unmeasurable — control lost" in summ
    assert any(line.startswith("— chat-history") and "no arm held" in line for line in lines)
    assert any(line.lstrip().startswith("default") or " default " in line for line in lines)


def test_write_report_files_are_complete_and_self_contained(tmp_path) -> None:
    curve, policy = _built(realistic())
    paths = write_report(policy, curve, tmp_path, name="run1", local_model=True)
    assert paths.markdown.url == str(tmp_path / "run1.md")
    assert paths.plot.read_bytes().startswith(b"\x89PNG")
    md = paths.markdown.read_text(encoding="utf-8")
    page = paths.html.read_text(encoding="utf-8")
    for text in (md, page):
        assert LOCAL_MODEL_BANNER in text
        assert "Noise floors" in text and "Every arm" in text
        assert "llmlingua2 r=0.6" in text  # every arm of the curve is listed
    assert "![reduction vs retention](run1.png)" in md
    assert "<svg" in page  # the plot, inline (its text kept as text)
    # nothing fetched: only data URIs and the SVG's references to its own parts
    assert not re.search(r"(src|href)\s*=\s*['\"](?!data:|#)", page)
    assert "<link" not in page and "<script" not in page


def test_banner_only_for_the_local_model(tmp_path) -> None:
    curve, policy = _built(realistic())
    paths = write_report(policy, curve, tmp_path, local_model=False)
    assert LOCAL_MODEL_BANNER not in paths.html.read_text(encoding="utf-8")


def test_provisional_is_said_in_words_and_ignored_arms_are_listed(tmp_path) -> None:
    grades = frame(
        cell("noisy", "control", uniform(100, 95)),
        cell("noisy", "prune@0.8", uniform(100, 96), reduction=0.1),
        cell("noisy", "prune@0.6", uniform(100, 70), reduction=0.2),
        cell("noisy", "prune@0.4", uniform(100, 97), reduction=0.3),
    )
    curve = aggregate(grades, tolerance=0.99, mode="mean")
    policy = decide(curve, calibration_id="report-test-0002", model="m")
    md = write_report(policy, curve, tmp_path).markdown.read_text(encoding="utf-8")
    assert (
        "the harness could not detect harm because the loss sits inside the 5.0% noise floor" in md
    )
    assert "ignored after the first failure: prune r=0.4" in md


def test_dynamic_text_is_escaped_in_html(tmp_path) -> None:
    evil = "<script>alert(1)</script>"
    grades = frame(
        cell("a", "control", uniform(90, 90), judge=evil),
        cell("a", "safe", uniform(90, 90), judge=evil),
    )
    curve, policy = _built(grades)
    page = write_report(policy, curve, tmp_path).html.read_text(encoding="utf-8")
    assert evil not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_judge_agreement_section(tmp_path) -> None:
    grades = frame(
        cell("a", "control", uniform(90, 90)),
        cell("a", "safe", uniform(90, 88)),
        cell("a", "control", uniform(90, 90), judge="claude-haiku-4-5"),
        cell("a", "safe", uniform(90, 80), judge="claude-haiku-4-5"),
    )
    curve, policy = _built(grades, judge="claude-haiku-4-5")
    agreement = judge_agreement(grades, judges=("metric", "claude-haiku-4-5"), tolerance=0.95)
    md = write_report(policy, curve, tmp_path, agreement=agreement).markdown.read_text("utf-8")
    assert "## Judge agreement" in md
    assert "metric and claude-haiku-4-5" in md


def test_unavailable_arms_are_reported_with_their_reason(tmp_path) -> None:
    curve, policy = _built(realistic())
    reason = "cannot load <weights>: offline (HF_HUB_OFFLINE=1)"
    paths = write_report(policy, curve, tmp_path, unavailable={"llmlingua2@0.4": reason})
    md = paths.markdown.read_text(encoding="utf-8")
    page = paths.html.read_text(encoding="utf-8")
    assert "## Not measured" in md and f"`llmlingua2@0.4` was unavailable: {reason}" in md
    assert "Not measured" in page and "cannot load &lt;weights&gt;" in page
    plain = write_report(policy, curve, tmp_path / "plain")
    assert "Not measured" not in plain.markdown.read_text(encoding="utf-8")


def test_outcome_line_says_which_classes_decided_what() -> None:
    """The CLI's last line (issue 28): exit 4 names what each class decided or why it was
    refused, so a failed arm reads as a finding and a small class as a refusal."""
    grades = frame(
        cell("decided", "control", uniform(80, 80, tasks=20, reps=1)),
        cell("decided", "safe", uniform(80, 40, tasks=20, reps=1)),
        cell("held", "control", uniform(80, 80, tasks=20, reps=1)),
        cell("held", "safe", uniform(80, 80, tasks=20, reps=1)),
        cell("small", "control", uniform(80, 80, tasks=3, reps=1)),
        cell("small", "safe", uniform(80, 80, tasks=3, reps=1)),
    )
    _, policy = _built(grades)
    (line,) = outcome_lines(policy, 4)
    assert line.startswith("exit 4: not certified. decided — ")
    assert "decided: no arm held (failed by its interval)" in line
    assert "held ? safe held" in line
    assert "refused — small (too few tasks)" in line
    (ok,) = outcome_lines(policy, 0)
    assert ok.startswith("exit 0: every class has an arm (✓ or ?).")


def test_noise_floor_bounds_never_pass_100_percent(tmp_path) -> None:
    """Two tasks, one control pair each, far apart: the t bound of the floor used to read
    past 100 % ("44.7 % (0.0 %-612.6 %)", issue 26); a share of quality lost cannot."""
    grades = frame(
        cell("a", "control", [[(80.0, 80.0)], [(80.0, 8.0)]]),
        cell("a", "safe", [[(80.0, 80.0)], [(80.0, 80.0)]]),
    )
    curve, policy = _built(grades)
    control = curve.table[curve.table["arm"] == "control"]
    assert (control["noise_floor"] > 0.4).all()
    assert (control["noise_floor_high"] <= 1.0).all()
    page = write_report(policy, curve, tmp_path).html.read_text(encoding="utf-8")
    shown = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", page)]
    assert shown and max(shown) <= 100.0


def test_people_corrected_retention_sits_beside_the_judges(tmp_path) -> None:
    from tokenlens.policy import Interval

    curve, policy = _built(realistic())
    plain = write_report(policy, curve, tmp_path, name="plain")
    assert "retention by people" not in plain.html.read_text(encoding="utf-8")
    entry = policy.classes["extraction"].model_copy(
        update={
            "people_retention": 0.912,
            "people_interval": Interval(low=0.87, high=0.95, confidence=0.95),
            "people_pairs": 12,
        }
    )
    reviewed = policy.model_copy(update={"classes": {**policy.classes, "extraction": entry}})
    paths = write_report(reviewed, curve, tmp_path, name="reviewed")
    for text in (paths.html.read_text(encoding="utf-8"), paths.markdown_text):
        assert "retention by people (95% bounds)" in text
        assert "91.2% (87.0%–95.0%), 12 reviewed pairs" in text


def widest_table(markdown: str) -> int:
    """Characters across the widest markdown table: its columns' longest cells, plus 4
    each (0: no table)."""
    widest, columns = 0, []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            columns = [
                max(a, len(c)) for a, c in zip(columns or [0] * len(cells), cells, strict=True)
            ]
        elif not line.startswith("|"):
            widest, columns = max(widest, sum(w + 4 for w in columns)), []
    return widest


def test_the_prefect_ui_gets_the_report_with_no_table_wider_than_its_pane(tmp_path) -> None:
    """Issue 26.12: at 1400 px the Prefect UI's artifact pane is ~840 px wide, and the
    report's 12-column per-class table hid its last columns behind a sideways scroll."""
    curve, policy = _built(realistic())
    paths = write_report(policy, curve, tmp_path, name="run1")
    assert widest_table(paths.markdown_text) > PANE_WIDTH  # the file keeps its tables
    assert 0 < widest_table(paths.pane_text) <= PANE_WIDTH
    for entry in policy.classes.values():  # every class and its reason is still there
        assert f"**{entry.task_class}** — verdict: " in paths.pane_text
        assert entry.reason in paths.pane_text
    assert "noise floor: " in paths.pane_text and "reason: " in paths.pane_text

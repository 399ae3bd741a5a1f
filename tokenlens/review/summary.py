"""The review's figures as plain text (`tokenlens review --summary`) and markdown.

Here arms are named: the summary is read after reviewing, never shown on the review page.
"""

from __future__ import annotations

import math
from pathlib import Path

from tokenlens.formatting import pct
from tokenlens.review.figures import POOR_ALPHA, Comparison, ReviewFigures, poor_agreement

_MAX_DISAGREEMENTS = 10


def _comparison_lines(c: Comparison, indent: str = "  ") -> list[str]:
    return [
        f"{indent}grades, Krippendorff's alpha (interval): {c.alpha.text()}",
        f"{indent}grades, Krippendorff's alpha (ordinal):  {c.alpha_ordinal.text()}",
        f"{indent}loss beyond tolerance, same call: {c.decisions.text()}",
    ]


def summary_lines(figures: ReviewFigures) -> list[str]:
    lines = [
        f"Review of calibration {figures.run_id}: judge {figures.judge}, "
        f"tolerance {figures.tolerance:.0%}, {figures.n_cases} sampled cases",
    ]
    if not figures.reviewers:
        return [*lines, "No grades yet: open the review page and grade some cases."]
    lines.append(
        "Reviewers: "
        + ", ".join(f"{name} ({n} graded)" for name, n in figures.reviewers.items())
        + f"; {figures.cant_tell} answers marked can't tell"
    )
    if figures.overall is not None:
        lines += ["", f"Judge {figures.judge} vs people:", *_comparison_lines(figures.overall)]
        shown = figures.overall.disagreements[:_MAX_DISAGREEMENTS]
        if shown:
            lines.append("  where they disagree (judge retention vs person retention):")
            for case, judge_kept, person_kept in shown:
                lines.append(
                    f"    case {case.position:>3} {case.task_class} {case.arm} "
                    f"r{case.replicate}: {pct(judge_kept, 0)} vs {pct(person_kept, 0)}"
                )
    for c in figures.by_reviewer if len(figures.by_reviewer) > 1 else []:
        lines += [f"Judge vs {c.second}:", *_comparison_lines(c)]
    for c in figures.other_judges:
        lines += ["", f"Judge {c.first} (third rater) vs people:", *_comparison_lines(c)]
    for c in figures.judges:
        lines += ["", f"Judge {c.first} vs judge {c.second} on the sample:", *_comparison_lines(c)]
    if figures.between_people is not None:
        lines += ["", f"Between people (alpha, interval): {figures.between_people.text()}"]
    if figures.control is not None:
        floor = figures.control
        lines += [
            "",
            f"Noise floor on {floor.n} reviewed control pairs: judge reads a "
            f"{floor.judge_loss:.1%} loss, people {floor.people_loss:.1%}",
        ]
    if figures.by_class:
        lines += ["", "Per class (judge vs people, alpha on grades):"]
        flags = poor_agreement(figures)
        for task_class, c in figures.by_class.items():
            mark = "  POOR" if task_class in flags else ""
            lines.append(f"  {task_class:<22} {c.alpha.text()}{mark}")
        lines.append(
            f"  POOR = the whole 95 % interval is below {POOR_ALPHA} (Krippendorff's minimum "
            "for tentative conclusions)."
        )
    if figures.corrected:
        lines += [
            "",
            "Retention corrected by people's grades (PPI++: the judge on every pair, people",
            "on the reviewed ones; one-sided 95 % bounds):",
        ]
        for task_class, arms in figures.corrected.items():
            for arm, e in arms.items():
                lines.append(
                    f"  {task_class:<22} {arm:<16} judge {pct(e.judge_value)}, corrected "
                    f"{pct(e.value)} [{pct(e.low)}, {pct(e.high)}] ({e.n_reviewed} reviewed "
                    f"of {e.n_all} pairs)"
                )
    return lines


def summary_markdown(figures: ReviewFigures) -> str:
    """The same figures for a Prefect markdown artifact."""
    return "## Judge vs people\n\n```\n" + "\n".join(summary_lines(figures)) + "\n```\n"


def class_records(figures: ReviewFigures) -> list[dict[str, object]]:
    """One row per class (judge vs people), JSON-ready, for a table artifact."""
    flags = poor_agreement(figures)
    rows: list[dict[str, object]] = []
    for task_class, c in figures.by_class.items():
        rows.append(
            {
                "class": task_class,
                "cases": c.alpha.n_cases,
                "alpha": _num(c.alpha.value),
                "alpha_low": _num(c.alpha.low),
                "alpha_high": _num(c.alpha.high),
                "same_call": _num(c.decisions.rate),
                "pairs_decided": c.decisions.n,
                "poor": task_class in flags,
            }
        )
    return rows


def _num(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 3)


CORRECTED_HEADER = (
    "class",
    "arm",
    "judge (per pair)",
    "corrected by people",
    "one-sided 95% bounds",
    "reviewed / all pairs",
    "judge's weight",
)


def corrected_rows(figures: ReviewFigures) -> list[list[str]]:
    """One row per class and arm with a people-corrected retention."""
    return [
        [
            task_class,
            arm,
            pct(e.judge_value),
            pct(e.value),
            f"{pct(e.low)}–{pct(e.high)}",
            f"{e.n_reviewed} / {e.n_all}",
            f"{e.weight:.2f}",
        ]
        for task_class, arms in figures.corrected.items()
        for arm, e in arms.items()
    ]


def write_review_page(folder: Path, figures: ReviewFigures) -> Path:
    """`review.html` beside the run's report: the review section of its report."""
    from tokenlens.policy import atomic_write_text
    from tokenlens.templating import render

    page = render(
        "review.html.j2",
        run_id=figures.run_id,
        corrected_header=CORRECTED_HEADER,
        corrected_rows=corrected_rows(figures),
        summary="\n".join(summary_lines(figures)),
    )
    path = folder / "review.html"
    atomic_write_text(path, page)
    return path

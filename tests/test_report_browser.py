"""The report a newcomer opens, as headless Chromium lays it out at 1400 px (issue 28,
point 4; issue 26, point 12): the verdict and why, the floor, the curve with intervals,
nothing cut off, and no axis past 100 %.

The plot is inline SVG with its text kept as text, so the axis labels the browser draws
are read from the page itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.browser import Browser
from tests.grade_tables import cell, frame
from tokenlens.decision import aggregate, decide
from tokenlens.plot import curve_figure
from tokenlens.report import write_report

WIDTH = 1400


def _report(tmp_path: Path) -> tuple[Path, str]:
    """20 graded tasks: a quiet control, `safe` keeps everything, `prune@0.6` loses all of
    it on most tasks (0 % retention), and `select@0.6` has no graded pair at all."""
    tasks = 20
    grades = frame(
        cell("extraction", "control", [[(60.0 + i, 60.0 + i)] for i in range(tasks)]),
        cell("extraction", "safe", [[(60.0 + i, 60.0 + i)] for i in range(tasks)], reduction=0.01),
        cell(
            "extraction",
            "prune@0.6",
            [[(60.0 + i, 0.0 if i % 5 else 30.0)] for i in range(tasks)],
            reduction=0.32,
        ),
        cell("extraction", "select@0.6", [[(60.0, None)] for _ in range(tasks)], reduction=0.3),
    )
    curve = aggregate(grades, tolerance=0.95)
    policy = decide(curve, calibration_id="browser-test-0001", model="tiny-local")
    entry = policy.classes["extraction"]
    assert entry.verdict == "provisional" and entry.method == "safe"
    paths = write_report(policy, curve, tmp_path, local_model=True)
    return Path(paths.html.url), entry.reason


def test_the_plot_axes_stay_within_0_to_100_and_hold_every_point(tmp_path: Path) -> None:
    tasks = 20
    grades = frame(
        cell("a", "control", [[(50.0, 50.0 + (i % 3))] for i in range(tasks)]),
        cell("a", "prune@0.6", [[(50.0, 0.0)] for _ in range(tasks)], reduction=0.35),
        cell("a", "select@0.6", [[(50.0, None)] for _ in range(tasks)], reduction=0.3),
    )
    curve = aggregate(grades, tolerance=0.95)
    fig = curve_figure(curve, decide(curve, calibration_id="plot-test-0001", model="m"))
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        low, high = ax.get_ylim()
        assert 0.0 <= low <= 0.0 + 1e-9 and high <= 100.0  # the arm at 0 % is on the plot
        assert ax.get_xlim()[0] >= 0.0 and ax.get_xlim()[1] <= 100.0
        # the unmeasured arm is named, never drawn at 0 %
        assert any("not measured: select r=0.6" in t.get_text() for t in ax.texts)
        labels = [t.get_text() for t in ax.texts]
        assert not any(label.startswith("select") for label in labels)


def test_report_at_1400px_shows_the_verdict_and_nothing_is_cut_off(tmp_path: Path) -> None:
    page, reason = _report(tmp_path)
    browser = Browser(tmp_path, window=(WIDTH, 1000))
    try:
        browser.open(page.as_uri())
        browser.wait_for("document.querySelector('svg') !== null")
        text = browser.text()
        # the verdict and why, and the floor, in words a newcomer reads
        assert "? extraction" in text and "safe" in text
        assert reason.split(" — ")[0] in text
        assert "Noise floors" in text and "0.0% (0.0%–0.0%)" in text
        # nothing wider than the window: the policy block wraps, tables fit
        overflow = browser.evaluate(
            "JSON.stringify({page: document.documentElement.scrollWidth,"
            " wide: [...document.querySelectorAll('pre, table, svg')]"
            ".filter(e => e.getBoundingClientRect().right > window.innerWidth"
            " || e.scrollWidth > e.clientWidth + 1).map(e => e.tagName)})"
        )
        measured = json.loads(overflow)
        assert measured["page"] <= WIDTH and measured["wide"] == [], measured
        # the axis labels the browser drew: every number within -100..100 %
        ticks = json.loads(
            browser.evaluate(
                "JSON.stringify([...document.querySelectorAll("
                "'svg g[id^=xtick] text, svg g[id^=ytick] text')].map(t => t.textContent))"
            )
        )
        numbers = [
            float(t.replace("−", "-")) for t in ticks if re.fullmatch(r"[−-]?\d+(\.\d+)?", t)
        ]
        assert numbers and all(-100.0 <= n <= 100.0 for n in numbers), ticks
        assert min(numbers) <= 0.0  # the arm at 0 % retention is inside the axis
        shot = browser.screenshot(tmp_path / "report.png")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        browser.close()

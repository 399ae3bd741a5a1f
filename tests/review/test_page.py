"""The review page in headless Chromium: a scripted reviewer grades a loopback calibration.

Must show: every case is shown exactly as the judge saw it (its own A/B order, checked
against the judge calls in the ledger), nothing on the page names an arm, a rate, a judge
or a grade (checked on the DOM and the visible text, screenshots saved), grades land in
the store as they are given, and closing the browser and the server then reopening
resumes at the next ungraded case.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tokenlens.calibration.cells import PairCell
from tokenlens.judge import JUDGE_SYSTEM, swap_for
from tokenlens.review.app import Review, create_app
from tokenlens.review.sample import BlindCase, ReviewCase, blind_case
from tokenlens.review.session import open_review

from .conftest import LoopbackRun, ThreadServer

CONTENT_IDS = ("request", "reference", "answer-a", "answer-b", "instructions")
#: Words that would tell a reviewer where an answer came from or what the judge said.
TELLING_WORDS = (
    "arm",
    "arms",
    "rate",
    "rates",
    "control",
    "clear",
    "cleartext",
    "compressed",
    "compression",
    "shortened",
    "prune",
    "safe",
    "minify",
    "dedup",
    "select",
    "llmlingua2",
    "retention",
    "metric",
    "claude-haiku-4-5",
    "grade_clear",
    "grade_comp",
    "noise",
)

CHROME_JS = """(() => {
  const body = document.body.cloneNode(true);
  for (const id of IDS) { const el = body.querySelector('#' + id); if (el) el.remove(); }
  const attrs = [...document.querySelectorAll('*')].flatMap(
    el => [...el.attributes].map(a => a.value));
  return {text: body.innerText, attrs: attrs.join(' '), title: document.title};
})()""".replace("IDS", json.dumps(list(CONTENT_IDS)))


def judge_prompts(store: Path) -> list[str]:
    calls = pq.read_table(store / "ledger" / "calls.parquet").to_pylist()
    prompts = []
    for call in calls:
        if call["kind"] == "judge":
            request = json.loads(call["request_json"])
            prompts.append(request["messages"][-1]["content"])
    return prompts


def expected_view(review: Review, case: ReviewCase) -> tuple[str, str]:
    """A and B computed from the tables on their own: the judge's order for this pair."""
    answers = review.run.answers
    clear = answers[(case.task_id, "clear", case.replicate, 0)]["text"]
    second = answers[(case.task_id, case.arm, case.replicate, 1)]["text"]
    key = PairCell(case.task_id, case.arm, case.replicate).case_key
    return (second, clear) if swap_for(key) else (clear, second)


def assert_blind(
    browser: Any, review: Review, case: ReviewCase, graded: int, prompts: list[str]
) -> None:
    blind: BlindCase = blind_case(review.run, review.sample, case)
    # The content is the judge's view, verbatim, in the judge's own order ...
    shown = {
        i: browser.evaluate(f"document.getElementById('{i}').textContent") for i in CONTENT_IDS
    }
    answer_a, answer_b = expected_view(review, case)
    assert (shown["answer-a"], shown["answer-b"]) == (answer_a, answer_b)
    assert shown["request"] == blind.request and shown["reference"] == blind.reference
    assert shown["instructions"] == JUDGE_SYSTEM
    assert any(
        f"<answer_a>\n{answer_a}\n</answer_a>" in p and f"<answer_b>\n{answer_b}\n</answer_b>" in p
        for p in prompts
    ), f"no judge call saw case {case.position} in this A/B order"
    # ... and everything around it tells nothing about arms, rates, judges or grades.
    chrome = browser.evaluate(CHROME_JS)
    for where in ("text", "attrs", "title"):
        for word in TELLING_WORDS:
            assert not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", chrome[where], re.I), (
                f"{word!r} in the page's {where}: {chrome[where][:300]!r}"
            )
    allowed = {str(case.position), str(len(review.sample.cases)), str(graded), "0", "100"}
    assert set(re.findall(r"\d+", chrome["text"])) <= allowed, chrome["text"]
    # Nothing in the page source names the arm or the pair's key, anywhere.
    dom = browser.dom()
    content = "".join(shown.values())
    for secret in (case.arm, case.case_key, case.task_id, review.sample.judge, "metric"):
        assert dom.count(secret) <= content.count(secret), secret


def test_scripted_reviewer_grades_blind_and_resumes(
    run_copy: LoopbackRun, browser: Any, tmp_path: Path
) -> None:
    loopback_run = run_copy
    review = open_review(loopback_run.store, loopback_run.run_id, tasks=None, size=10)
    cases = review.sample.cases
    assert len(cases) == 10
    prompts = judge_prompts(loopback_run.store)
    shots: list[Path] = []

    with ThreadServer(create_app(review)) as server:
        page = browser()
        page.open(f"{server.base_url}/r/alice/")
        page.wait_for(f"location.pathname.endsWith('/case/{cases[0].case_id}')")

        # Case 1 with the keyboard: the A box has focus; Escape, b, type, Enter saves.
        assert_blind(page, review, cases[0], 0, prompts)
        shots.append(page.screenshot(tmp_path / "review-case-1.png"))
        page.type("80")
        page.press("Escape")
        page.press("b")
        page.type("55")
        page.press("Enter")
        page.wait_for(f"location.pathname.endsWith('/case/{cases[1].case_id}')")
        stored = review.store.grade("alice", cases[0].case_id)
        assert stored is not None and (stored.grade_a, stored.grade_b) == (80, 55)

        # Case 2: "x" marks A as can't tell, then grade B.
        assert_blind(page, review, cases[1], 1, prompts)
        page.press("Escape")
        page.press("x")
        page.press("b")
        page.type("40")
        page.press("Enter")
        page.wait_for(f"location.pathname.endsWith('/case/{cases[2].case_id}')")
        stored = review.store.grade("alice", cases[1].case_id)
        assert stored is not None and (stored.grade_a, stored.grade_b) == (None, 40)

        # Case 3: a grade off the scale is refused on the page, and nothing is stored.
        assert_blind(page, review, cases[2], 2, prompts)
        page.evaluate(
            "document.getElementById('grade-a').value = '70';"
            "document.getElementById('grade-b').removeAttribute('max');"
            "document.getElementById('grade-b').value = '140';"
            "document.getElementById('grades').submit()"
        )
        page.wait_for("document.getElementById('error') !== null")
        assert "140 is outside the scale 0-100" in page.text()
        shots.append(page.screenshot(tmp_path / "review-refused.png"))
        assert review.store.grade("alice", cases[2].case_id) is None
        page.evaluate(
            "document.getElementById('grade-b').value = '65';"
            "document.getElementById('grades').submit()"
        )
        page.wait_for(f"location.pathname.endsWith('/case/{cases[3].case_id}')")
        assert_blind(page, review, cases[3], 3, prompts)
        shots.append(page.screenshot(tmp_path / "review-case-4.png"))
        page.close()  # close the tab and stop the server mid-review

    # Reopen everything from the store: the review resumes at case 4.
    reopened = open_review(loopback_run.store, loopback_run.run_id, tasks=None, size=None)
    assert reopened.sample == review.sample
    with ThreadServer(create_app(reopened)) as server:
        page = browser()
        page.open(f"{server.base_url}/r/alice/")
        page.wait_for(f"location.pathname.endsWith('/case/{cases[3].case_id}')")
        assert "Case 4 of 10" in page.text() and "3 of 10 graded by alice" in page.text()
        # p / n step through the cases; a graded case shows the reviewer's own grades.
        page.press("Escape")
        page.press("p")
        page.wait_for(f"location.pathname.endsWith('/case/{cases[2].case_id}')")
        assert "You graded this case already" in page.text()
        assert_blind(page, reopened, cases[2], 3, prompts)
        assert page.evaluate("document.getElementById('grade-a').value") == "70"
        assert page.evaluate("document.getElementById('grade-b').value") == "65"
        page.press("Escape")
        page.press("n")
        page.wait_for(f"location.pathname.endsWith('/case/{cases[3].case_id}')")
        for index, case in enumerate(cases[3:], start=3):
            assert_blind(page, reopened, case, index, prompts)
            page.evaluate(
                f"document.getElementById('grade-a').value = '{50 + index}';"
                f"document.getElementById('grade-b').value = '{40 + index}';"
                "document.getElementById('grades').submit()"
            )
            following = cases[index + 1].case_id if index + 1 < len(cases) else None
            page.wait_for(
                f"location.pathname.endsWith('/case/{following}')"
                if following
                else "location.pathname.endsWith('/done')"
            )
        assert "10 of 10 graded by alice" in page.text()
        shots.append(page.screenshot(tmp_path / "review-done.png"))

    grades = {g.case_id: g for g in reopened.store.grades("alice")}
    assert set(grades) == {c.case_id for c in cases}
    for shot in shots:
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    print(f"review screenshots: {', '.join(str(s) for s in shots)}")

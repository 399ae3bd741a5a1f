"""Bad input to the review page gets a clear 4xx and changes nothing stored; the sample is
stratified, opaque and never redrawn."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pytest

from tokenlens.compress.arms import CONTROL
from tokenlens.errors import TokenLensError
from tokenlens.review.app import create_app
from tokenlens.review.sample import ReviewError
from tokenlens.review.session import open_review
from tokenlens.review.store import ReviewStore

from .conftest import CLASSES, LoopbackRun, ThreadServer

FORM = {"content-type": "application/x-www-form-urlencoded"}


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("grade_a=101&grade_b=50", 422, "answer A: 101 is outside the scale 0-100"),
        ("grade_a=50&grade_b=-1", 422, "answer B: -1 is outside the scale 0-100"),
        ("grade_a=7.5&grade_b=50", 422, "answer A: &#39;7.5&#39; is not a whole number 0-100"),
        ("grade_a=abc&grade_b=50", 422, "answer A: &#39;abc&#39; is not a whole number 0-100"),
        ("grade_a=&grade_b=50", 422, "answer A: no grade (or mark can&#39;t tell)"),
        ("grade_a=40&cant_tell_a=1&grade_b=50", 422, "answer A: give a grade or mark can"),
        ("grade_b=50", 422, "answer A: no grade"),
        ("grade_a=1" + "0" * 5000, 413, "form of more than 4096 bytes"),
    ],
)
def test_bad_grades_are_refused_and_store_nothing(
    run_copy: LoopbackRun, body: str, status: int, message: str
) -> None:
    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=6)
    case = review.sample.cases[0]
    review.store.record(review.sample, "bob", review.sample.cases[1].case_id, 70, 60)
    before = snapshot(review.store.root)
    with ThreadServer(create_app(review)) as server:
        url = f"{server.base_url}/r/bob/case/{case.case_id}"
        response = httpx.post(url, content=body, headers=FORM)
    assert response.status_code == status, response.text
    assert message in response.text
    assert snapshot(review.store.root) == before


def test_unknown_case_bad_name_and_wrong_encoding_are_refused(run_copy: LoopbackRun) -> None:
    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=6)
    case = review.sample.cases[0]
    before = snapshot(review.store.root)
    good = "grade_a=50&grade_b=50"
    with ThreadServer(create_app(review)) as server:
        base = server.base_url
        unknown = httpx.post(f"{base}/r/bob/case/0123456789ab", content=good, headers=FORM)
        assert unknown.status_code == 404
        assert "case &#39;0123456789ab&#39; is not in this review&#39;s sample" in unknown.text
        assert httpx.get(f"{base}/r/bob/case/0123456789ab").status_code == 404
        bad_name = httpx.post(f"{base}/r/b%20b/case/{case.case_id}", content=good, headers=FORM)
        assert bad_name.status_code == 400 and "reviewer name" in bad_name.text
        assert httpx.get(f"{base}/?reviewer=..").status_code == 400
        as_json = httpx.post(f"{base}/r/bob/case/{case.case_id}", json={"grade_a": 50})
        assert as_json.status_code == 415 and "as a form" in as_json.text
        # A hostile value is shown as text on the refusal, never as markup.
        hostile = httpx.post(
            f"{base}/r/bob/case/{case.case_id}",
            content="grade_a=%3Cscript%3E&grade_b=1",
            headers=FORM,
        )
        assert hostile.status_code == 422 and "<script>" not in hostile.text.split("</head>")[1]
        # Another site cannot post grades through the reviewer's browser, nor rebind DNS.
        foreign = {**FORM, "origin": "https://evil.example"}
        cross = httpx.post(f"{base}/r/bob/case/{case.case_id}", content=good, headers=foreign)
        assert cross.status_code == 403 and "evil.example" in cross.text
        rebound = httpx.get(f"{base}/", headers={"host": "evil.example"})
        assert rebound.status_code == 400
        assert "default-src 'none'" in hostile.headers["content-security-policy"]
    assert snapshot(review.store.root) == before
    with pytest.raises(ReviewError, match="not in this review's sample"):
        review.store.record(review.sample, "bob", "nope", 50, 50)
    with pytest.raises(ReviewError, match="outside the scale 0-100"):
        review.store.record(review.sample, "bob", case.case_id, 50, 101)
    assert snapshot(review.store.root) == before


def test_sample_is_stratified_opaque_and_kept(run_copy: LoopbackRun) -> None:
    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=12)
    cases = review.sample.cases
    # 2 classes x 3 arms (control, safe, prune@0.6): 12 cases give each cell 2.
    assert Counter((c.task_class, c.arm) for c in cases) == {
        (cls, arm): 2 for cls in CLASSES for arm in (CONTROL, "safe", "prune@0.6")
    }
    assert [c.position for c in cases] == list(range(1, 13))
    assert len({c.case_id for c in cases}) == 12
    assert all(len(c.case_id) == 12 and c.arm not in c.case_id for c in cases)
    # Reopening keeps the same sample; asking for another size is refused, clearly.
    assert (
        open_review(run_copy.store, run_copy.run_id, tasks=None, size=None).sample == review.sample
    )
    with pytest.raises(ReviewError, match="has 12 cases; it is kept"):
        open_review(run_copy.store, run_copy.run_id, tasks=None, size=20)


def test_small_sample_covers_classes_with_control_first(run_copy: LoopbackRun) -> None:
    from tokenlens.review.sample import draw_sample, load_run

    run = load_run(run_copy.store, run_copy.run_id, None)
    two = draw_sample(run, 2)
    assert {c.task_class for c in two.cases} == set(CLASSES)
    assert {c.arm for c in two.cases} == {CONTROL}
    assert draw_sample(run, 2) == two  # the draw is reproducible


def test_references_must_be_the_ones_the_run_measured(
    run_copy: LoopbackRun, tmp_path: Path
) -> None:
    from tokenlens.tasks import task_files

    lines = [line for file in task_files() for line in file.read_text().splitlines()]
    edited = tmp_path / "edited.jsonl"
    edited.write_text(
        "\n".join(line.replace('"reference": "', '"reference": "X', 1) for line in lines)
    )
    with pytest.raises(TokenLensError, match=r"differs from the one the run measured.*--tasks"):
        open_review(run_copy.store, run_copy.run_id, tasks=edited, size=4)
    assert not ReviewStore(run_copy.store, run_copy.run_id).sample_path.exists()

"""`tokenlens review`: `--summary` prints the figures and writes nothing, `--publish` writes
them into the run's report and policies; the command serves the page on loopback."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from tokenlens.calibration.cells import PairCell
from tokenlens.cli import main as cli_main
from tokenlens.review.session import open_review

from .conftest import LoopbackRun, free_port

REPO = Path(__file__).resolve().parents[2]


def test_summary_prints_agreement_of_two_reviewers(
    run_copy: LoopbackRun, capsys: pytest.CaptureFixture[str]
) -> None:
    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=12)
    grades = pq.read_table(run_copy.store / "runs" / run_copy.run_id / "grades.parquet")
    judge = {
        PairCell(r["task_id"], r["arm"], r["replicate"]).case_key: r
        for r in grades.to_pylist()
        if r["judge"] == review.sample.judge and not r["judge_pass"]
    }
    rng = random.Random(1)
    for case in review.sample.cases:
        row = judge[case.case_key]
        clear, comp = int(row["grade_clear"]), int(row["grade_comp"])
        a, b = (comp, clear) if case.clear_is_b else (clear, comp)
        review.store.record(review.sample, "copier", case.case_id, a, b)
        review.store.record(
            review.sample, "guesser", case.case_id, rng.randint(0, 100), rng.randint(0, 100)
        )

    args = ["review", "--reports", str(run_copy.config.reports), "--summary"]
    assert cli_main([*args, "--store", str(run_copy.store)]) == 0
    out = capsys.readouterr().out
    print(out)
    assert f"Review of calibration {run_copy.run_id}: judge claude-haiku-4-5" in out
    assert "Reviewers: copier (12 graded), guesser (12 graded)" in out
    copier = out.split("Judge vs copier:")[1].splitlines()
    assert "alpha (interval): 1.00 [1.00, 1.00] (12 cases)" in copier[1]
    assert re.search(r"same call: 100% \[\d+%, 100%\] of \d+ pairs", copier[3])
    guesser = out.split("Judge vs guesser:")[1].splitlines()
    assert float(guesser[1].split(": ")[1].split()[0]) < 0.2
    assert "same call: 100%" not in guesser[3]
    assert "Judge metric (third rater) vs people:" in out
    assert "Between people (alpha, interval):" in out
    assert "Noise floor on" in out and "reviewed control pairs" in out
    assert "Per class (judge vs people, alpha on grades):" in out
    assert "extraction" in out and "numeric-reasoning" in out


def test_summary_without_a_review_says_so(
    run_copy: LoopbackRun, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["review", run_copy.run_id, "--store", str(run_copy.store), "--summary"]
    assert cli_main([*args, "--reports", str(run_copy.config.reports)]) == 2
    assert "no review of" in capsys.readouterr().err


def test_command_serves_the_page_on_loopback(run_copy: LoopbackRun) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-u", "-m", "tokenlens", "review", "--sample", "5"]
    command += ["--reports", str(run_copy.config.reports), "--store", str(run_copy.store)]
    command += ["--reviewer", "eve", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert f"review of {run_copy.run_id}: 5 cases" in first
        assert f"open http://127.0.0.1:{port}/r/eve/" in process.stdout.readline()
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/r/eve/", follow_redirects=True)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        assert response.status_code == 200 and "Case 1 of 5" in response.text
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()


def test_poor_agreement_goes_into_the_policy_reason(run_copy: LoopbackRun) -> None:
    from tokenlens.policy import load_policy
    from tokenlens.review import with_review_flags

    policy = load_policy(run_copy.config.reports / "runs" / run_copy.run_id / "policy.json")
    sentence = "people disagree with the judge on this class (alpha 0.10)"
    flagged = with_review_flags(policy, {"extraction": sentence})
    assert flagged.classes["extraction"].reason == (
        f"{policy.classes['extraction'].reason} Review: {sentence}."
    )
    assert flagged.classes["extraction"].verdict == policy.classes["extraction"].verdict
    assert flagged.classes["numeric-reasoning"] == policy.classes["numeric-reasoning"]
    assert flagged.default == policy.default


def test_summary_writes_nothing_publish_writes_poor_agreement_into_the_runs_policy(
    run_copy: LoopbackRun, capsys: pytest.CaptureFixture[str]
) -> None:
    from tokenlens.policy import load_policy

    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=12)
    grades = pq.read_table(run_copy.store / "runs" / run_copy.run_id / "grades.parquet")
    judge = {
        PairCell(r["task_id"], r["arm"], r["replicate"]).case_key: r
        for r in grades.to_pylist()
        if r["judge"] == review.sample.judge and not r["judge_pass"]
    }
    for case in review.sample.cases:  # a person who reads every grade the other way round
        row = judge[case.case_key]
        clear, comp = 100 - int(row["grade_clear"]), 100 - int(row["grade_comp"])
        a, b = (comp, clear) if case.clear_is_b else (clear, comp)
        review.store.record(review.sample, "contrarian", case.case_id, a, b)
    path = run_copy.config.reports / "runs" / run_copy.run_id / "policy.json"
    before = load_policy(path)
    policies = [*sorted((run_copy.config.reports / "policy").glob("*.json")), path]
    files = {p: p.read_bytes() for p in policies}
    args = ["review", "--reports", str(run_copy.config.reports), "--summary"]
    assert cli_main([*args, "--store", str(run_copy.store)]) == 0
    summary = capsys.readouterr().out
    # A summary writes nothing: not the policies (latest.json is what proxies reload), not
    # the report; it says what publishing would note.
    assert {p: p.read_bytes() for p in policies} == files
    assert not (path.parent / "review.html").exists()
    assert f"--publish would note poor agreement in the reasons of {path}" in summary
    assert "nothing was written: `tokenlens review --publish`" in summary
    args = ["review", "--reports", str(run_copy.config.reports), "--publish"]
    for _ in range(2):  # idempotent: the note is written once
        assert cli_main([*args, "--store", str(run_copy.store)]) == 0
    out = capsys.readouterr().out
    assert f"poor agreement noted in the reasons of {path}" in out
    page = path.parent / "review.html"
    assert f"review section of the report: {page}" in out
    html = page.read_text(encoding="utf-8")
    assert "Judge vs people" in html and "<script" not in html
    after = load_policy(path)
    flagged = [n for n, e in after.classes.items() if "Review: " in e.reason]
    assert flagged
    for name in flagged:
        assert after.classes[name].reason.count("Review: ") == 1
        assert after.classes[name].verdict == before.classes[name].verdict


def test_people_who_read_a_loss_withdraw_the_arm_from_the_policy_the_proxy_reads(
    run_copy: LoopbackRun, capsys: pytest.CaptureFixture[str]
) -> None:
    from collections import Counter

    from tokenlens.compress.arms import Arm
    from tokenlens.policy import atomic_write_text, load_policy

    review = open_review(run_copy.store, run_copy.run_id, tasks=None, size=40)
    # The loopback run is too small to hold an arm; say its judge held the arm people will
    # review most, in each class, so there is something for people to take away.
    reviewed = Counter((c.task_class, c.arm) for c in review.sample.cases if not c.is_control)
    path = run_copy.config.reports / "runs" / run_copy.run_id / "policy.json"
    policy = load_policy(path)
    classes = dict(policy.classes)
    for (task_class, key), _ in reviewed.most_common():
        if task_class in classes and classes[task_class].arm is None:
            arm = Arm.parse(key)
            classes[task_class] = classes[task_class].model_copy(
                update={
                    "verdict": "provisional",
                    "method": arm.method,
                    "rate": arm.rate,
                    "cause": None,
                }
            )
    atomic_write_text(path, policy.model_copy(update={"classes": classes}).model_dump_json())
    armed = {name for name, entry in classes.items() if entry.arm is not None}
    assert armed
    grades = pq.read_table(run_copy.store / "runs" / run_copy.run_id / "grades.parquet")
    judge = {
        PairCell(r["task_id"], r["arm"], r["replicate"]).case_key: r
        for r in grades.to_pylist()
        if r["judge"] == review.sample.judge and not r["judge_pass"]
    }
    for case in review.sample.cases:  # a person who sees every compressed answer lose half
        row = judge[case.case_key]
        clear = int(row["grade_clear"])
        comp = int(row["grade_comp"]) if case.is_control else clear // 2
        a, b = (comp, clear) if case.clear_is_b else (clear, comp)
        review.store.record(review.sample, "strict", case.case_id, a, b)
    args = ["review", "--reports", str(run_copy.config.reports), "--publish"]
    assert cli_main([*args, "--store", str(run_copy.store)]) == 0
    out = capsys.readouterr().out
    after = load_policy(path)
    withdrawn = {name for name in armed if after.classes[name].arm is None}
    assert withdrawn, out
    for name in withdrawn:
        entry = after.classes[name]
        assert (entry.verdict, entry.cause) == ("none", "no_arm_held")
        assert "is withdrawn" in entry.reason
        assert f"{name}: arm withdrawn, people's grades put it below the tolerance" in out

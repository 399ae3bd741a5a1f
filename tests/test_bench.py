"""Every bench script runs, in its `--quick` mode, and prints its figures.

A bench is run by hand, rarely; without this a moved data file or a changed API breaks
the next person who measures instead of CI (bench_ladder.py once crashed on a test data
folder that had moved). The quick modes measure nothing worth reading: they run every
code path of the script on small inputs, in seconds. A new script in bench/ must be
added to `QUICK` (one line) or to `NOT_RUN` with the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"

#: script -> what its quick run must print (regular expressions, each found in stdout).
QUICK: dict[str, tuple[str, ...]] = {
    "bench_agent.py": (
        r"kind\s+arm\s+reqs\s+tool tok",
        r"all\s+safe\s+\d+\s+\d+\s+\d+\.\d%\s+\d+\.\d%\s+0\s+0\s+0\s+\d+\.\d\s+faithful",
        r"tool-policy walk \S+ +lossless \d+\.\d%",
        r"all\s+policy-applied arms\s+\d+\s+\d+\s+\d+\.\d%\s+\d+\.\d%\s+0\s+0\s+0\s",
        r"load average",
    ),
    "bench_calibration.py": (
        r"wall time\s+\d+\.\d+ s",
        r"\d+\.\d+x ideal",
        r"start-up\s+-?\d+\.\d+ s",
        r"tail\s+\d+\.\d+ s",
        r"cached rerun:\s+\d+\.\d+ s, 0 calls",
        r"load average",
    ),
    "bench_classify.py": (r"\n\s+1\s+\d+\.\d+\s+\d+\.\d+", r"bundle file: \d+ KiB"),
    "bench_classify_traffic.py": (r"traffic: \d+ requests", r"tasks: right \d+", r"load average"),
    "bench_dryrun_counts.py": (r"one at a time \d+\.\d s, \d+ at a time \d+\.\d s", r"load"),
    "bench_ladder.py": (
        r"prune@0\.5\s+\d+\.\d+ MB/s",
        r"select@0\.5\s+p50\s+\d+\.\d+ ms\s+p99",
        r"prune@0\.5\s+\d+\.\d+ / +\d+\.\d+ ms.*\d+\.\d+\s+\d+\.\d+\n",
        r"garbage collector: start-up heap frozen after the warm-up, as in the proxy",
        r"prune@0\.5   \d+\.\d+ / \d+\.\d+ ms  \(no paragraph repeats\)",
        r"machine's own tail: .* p50 \d+\.\d+ / p99 \d+\.\d+ ms",
        r"prune@0\.5 +removes +\d+\.\d% of [\d,]+ tokens",
        r"load average",
    ),
    # --quick skips the local model's rows (minutes on 2 cores; tests/models loads it)
    "bench_models.py": (r"loopback latency_s=0\.0: \d+ calls", r"20% injected"),
    "bench_plan_power.py": (
        r"spread 97\.5 %\s+drawn\s+\?\s+\d+ tasks held\s+\d+\.\d%",
        r"concentrated 99 %\s+formula .* certain\s+\d+\.\d%",
        r"noisy\s+re-answer\s+\d+\.\d%\s+\d+\.\d%\s+\d+\.\d\d",
        r"quiet\s+4th repeat\s+\d+\.\d%",
        r"load average",
    ),
    "bench_proxy.py": (
        r"ours\s+p50\s+\d+\.\d+ p99\s+\d+\.\d+ ms\s+over floor",
        r"over the floor, p50",
        r"CPU per streamed / plain request, 1 in flight, ours: \d+ / \d+ us",
        r"load average",
    ),
    "bench_proxy_agent.py": (
        r"\| tokenlens \| -?\d+\.\d+ \| -?\d+\.\d+ \| \d+\.\d+ \|",
        r"added over pass-through p50 -?\d+\.\d+ ms",
        r"load average",
    ),
    "bench_observe.py": (r"metrics \+ access log\s+p50 \d+(\.\d+)? us", r"load"),
    "bench_scale.py": (r"durable put:\s+\S+", r"cache hit"),
    "bench_simulation.py": (
        r"SUMMARY worst false application: \d+\.\d% \[",
        r"SUMMARY 20x3 concentrated fixed: power \d+\.\d%.*savings \d+\.\d%",
        r"SUMMARY 20x3 noisy sequential: power \d+\.\d%.*savings \d+\.\d%",
        r"concentrated, derail 0\.0%\s+\d+\.\d%",
        r"harm as derails .* median of repeats: applied \d+\.\d%",
        r"re-answer, derail guard +0\.0 +60x3 +1\.\d\d +1\.\d\d +\d+\.\d\d +\d+\.\d%",
        r"load average",
    ),
    "bench_skew_cap.py": (
        r"concentrated 40x3\s+4\s+\d+\.\d% ->\s*\d+\.\d%",
        r"rare-severe 40x3 .*->\s*\d+\.\d%\n",
        r"load average",
    ),
    "bench_upstream_checks.py": (r"round 1: p50 plain \d+\.\d us", r"header check"),
    "bench_task_set.py": (r"prune@0\.5", r"\n  extraction +\d+\.\d%", r"zlib ratio of real text"),
    "bench_outage.py": (
        r"breaker open after \d+\.\d+ s .*: connection refused to http://127\.0\.0\.1:\d+",
        r"without the breaker: ~\d+ s",
        r"load average",
    ),
}

#: scripts in bench/ not run here, and why.
NOT_RUN: dict[str, str] = {
    "screenshot_artifacts.py": (
        "not a measurement: pictures of the Prefect UI, needing the optional [screenshots] "
        "extra (playwright) and a Prefect server with its UI; tests/test_report_browser.py "
        "checks the rendered report in Chromium"
    ),
}

#: the quick runs that talk to the session's Prefect server.
NEEDS_PREFECT = {"bench_calibration.py"}


def test_every_bench_script_is_run_or_excused() -> None:
    scripts = {path.name for path in BENCH.glob("*.py")}
    assert scripts == set(QUICK) | set(NOT_RUN)
    assert not set(QUICK) & set(NOT_RUN)


def run_quick(script: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"{script} --quick exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def check_figures(script: str, out: str) -> None:
    missing = [pattern for pattern in QUICK[script] if not re.search(pattern, out)]
    assert not missing, f"{script} --quick printed no {missing}:\n{out}"


@pytest.mark.parametrize("script", sorted(set(QUICK) - NEEDS_PREFECT))
def test_a_bench_runs_quick_and_prints_its_figures(script: str) -> None:
    check_figures(script, run_quick(script))


@pytest.mark.slow
def test_the_calibration_bench_runs_quick_on_the_session_server(prefect_api: str) -> None:
    out = run_quick("bench_calibration.py", {"PREFECT_API_URL": prefect_api})
    check_figures("bench_calibration.py", out)


def test_the_figure_patterns_catch_a_bench_that_prints_nothing() -> None:
    with pytest.raises(AssertionError, match="printed no"):
        check_figures("bench_ladder.py", "load average 0.1\n")

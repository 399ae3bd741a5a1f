"""The article's `serve` line, typed as printed, runs the proxy it promises.

The article ("You Can't Compress What You Can't Grade") tells readers to run
`python3 -m tokenlens serve --compress llmlingua2 --rate 0.6 --measure --judge
--judge-sample 0.25 --eval-report tokenlens-eval.json`. This starts exactly that command
(plus `--upstream` and `--port`, aimed at the loopback Anthropic server), sends one request
through the official SDK, and reads back from the dashboard's feed that every option took
effect: the fixed arm for every request, the policy file for the bars, measure and judge on.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import httpx

from tokenlens.policy import write_policy
from tokenlens.testing import FakeAnthropic

from .conftest import KEY, free_port, messages_body, standard_policy

ARTICLE_LINE = (
    "python3 -m tokenlens serve --compress llmlingua2 --rate 0.6 --measure "
    "--judge --judge-sample 0.25 --eval-report tokenlens-eval.json"
)


def test_the_articles_serve_line(fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    write_policy(standard_policy(), tmp_path / "policy")
    (tmp_path / "tokenlens-eval.json").write_bytes(
        (tmp_path / "policy" / "latest.json").read_bytes()
    )
    words = shlex.split(ARTICLE_LINE)
    assert words[:3] == ["python3", "-m", "tokenlens"]
    port = free_port()
    command = [sys.executable, *words[1:], "--upstream", fake_anthropic.base_url]
    command += ["--port", str(port)]
    # No Hugging Face download here: LLMLingua-2 fails open (the original is forwarded).
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    log = (tmp_path / "serve.log").open("ab")
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                httpx.get(f"{base}/tokenlens/feed.json", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "tokenlens serve did not start"
                time.sleep(0.05)
        with anthropic.Anthropic(api_key=KEY, base_url=base, max_retries=0) as client:
            reply = client.messages.create(
                **messages_body(), extra_headers={"x-tokenlens-class": "extraction"}
            )
        assert reply.content[0].type == "text" and reply.content[0].text
        feed = httpx.get(f"{base}/tokenlens/feed.json", timeout=5).json()
        page = httpx.get(f"{base}/tokenlens/", timeout=5).text
    finally:
        process.terminate()
        process.wait(timeout=20)

    assert feed["requests_total"] == 1
    settings = feed["settings"]
    assert settings["override"] == "llmlingua2@0.6"  # --compress llmlingua2 --rate 0.6
    assert settings["measure"] is True  # --measure
    assert (settings["judge"], settings["judge_sample"]) == (True, 0.25)  # --judge ...
    assert feed["policy"]["path"] == "tokenlens-eval.json"  # --eval-report FILE
    extraction = next(row for row in feed["classes"] if row["task_class"] == "extraction")
    # The fixed arm is in force for the class; the eval report still supplies its bar.
    assert extraction["arm_in_force"] == "llmlingua2@0.6"
    assert extraction["why"] == "--compress override"
    assert (extraction["policy_arm"], extraction["bar"]) == ("prune@0.5", 0.9)
    assert extraction["requests"] == 1
    assert "--compress: every request gets llmlingua2@0.6; the policy gives only" in page
    output = (tmp_path / "serve.log").read_text()
    assert "SHADOW JUDGE IS ON" in output  # the startup warning about the judge's spend

"""`tokenlens tool-policy --dry-run`: its closing figure counts every kind's tool output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokenlens.cli import main
from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks, write_tasks

#: Two JSON reads (a rung holds) and two git logs whose facts sit in commit message bodies
#: (no rung holds: `elide@0.9` drops them, `lossless` saves almost nothing there).
IDS = ("agent-json-001", "agent-json-002", "agent-vcs-body-003", "agent-vcs-body-005")


def test_a_kind_left_alone_counts_in_the_closing_figure(
    tmp_path: Path, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [t for t in load_tasks(AGENT_TASKS_PATH) if t.id in IDS]
    assert len(tasks) == len(IDS)
    write_tasks(tasks, tmp_path / "tasks.jsonl")
    args = ["tool-policy", str(tmp_path / "tasks.jsonl"), "--policy", str(policy_file)]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^vcs\s+-> — no tool-output rung held", out, flags=re.M), out
    (chosen,) = re.findall(r"^json\s+-> \S+ (\S+): ", out, flags=re.M)
    (json_saved,) = re.findall(rf"^json\s+{re.escape(chosen)}\s+\d+\s+([\d.]+)%", out, re.M)
    (overall,) = re.findall(r"all kinds at the chosen rungs: ([\d.]+)%", out)
    # the git logs went out as they came, so the whole saves less than the JSON alone
    assert 0 < float(overall) < float(json_saved) - 1

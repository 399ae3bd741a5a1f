"""The local backend's brief-answer instruction: on every answer request of a local run,
the cleartext's and each arm's alike, and on no request of an Anthropic run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenlens.calibration.stages import answer_requests, calibration_key
from tokenlens.compress import CompressSettings, compress_request
from tokenlens.compress.arms import build_ladder
from tokenlens.config import CalibrationConfig
from tokenlens.models.chat import BRIEF_ANSWER_INSTRUCTION, brief_answer


def _last_text(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else str(content[-1]["text"])


def test_brief_answer_adds_a_last_block_and_leaves_the_input_alone() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Who paid?"}]}
    briefed = brief_answer(body)
    assert body["messages"][0]["content"] == "Who paid?"
    assert briefed["messages"][0]["content"] == [
        {"type": "text", "text": "Who paid?"},
        {"type": "text", "text": BRIEF_ANSWER_INSTRUCTION},
    ]
    blocks = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "ctx"}]}],
    }
    assert brief_answer(blocks)["messages"][0]["content"][-1]["text"] == BRIEF_ANSWER_INSTRUCTION
    assert len(blocks["messages"][0]["content"]) == 1


def _requests(config: CalibrationConfig) -> dict[Any, Any]:
    tasks = config.selected_tasks()
    settings = CompressSettings()
    rows = []
    for task in tasks:
        body = task.to_request(model="m", max_tokens=config.max_tokens)
        for arm in build_ladder(config.methods, config.rates):
            result = compress_request(body, arm, settings=settings)
            rows.append(
                {
                    "task_id": task.id,
                    "arm": arm.key,
                    "status": "ok",
                    "reason": None,
                    "body_json": json.dumps(result.body),
                }
            )
    return answer_requests(config, "m", tasks, rows).requests


def _config(backend: str, tmp_path: Path) -> CalibrationConfig:
    return CalibrationConfig(
        backend=backend,  # type: ignore[arg-type]
        classes=("extraction",),
        max_tasks_per_class=2,
        methods=("safe", "prune"),
        rates=(0.4,),
        repeats=1,
        store=tmp_path,
    )


def test_every_answer_request_of_a_local_run_ends_with_the_instruction(tmp_path: Path) -> None:
    requests = _requests(_config("local", tmp_path))
    arms = {cell.arm for cell in requests}
    assert {"clear", "control", "safe", "prune@0.4"} <= arms
    for request in requests.values():
        assert _last_text(request.messages[-1].content) == BRIEF_ANSWER_INSTRUCTION


def test_anthropic_requests_are_sent_as_the_task_wrote_them(tmp_path: Path) -> None:
    for request in _requests(_config("anthropic", tmp_path)).values():
        assert BRIEF_ANSWER_INSTRUCTION not in json.dumps(request.model_dump(mode="json"))


def test_the_instruction_is_part_of_a_local_calibration_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _config("local", tmp_path)
    tasks = local.selected_tasks()
    before = calibration_key(local, tasks, "m")
    monkeypatch.setattr("tokenlens.models.chat.BRIEF_ANSWER_INSTRUCTION", "Answer in one word.")
    assert calibration_key(local, tasks, "m") != before

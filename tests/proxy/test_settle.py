"""The proxy process's start-up: warm-up arms, and the heap frozen after loading them."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tokenlens.compress.arms import Arm
from tokenlens.proxy.apply import WARM_LOSSY_ARM, warm_up
from tokenlens.proxy.settings import FLOOR_ARM, ProxySettings


def test_warm_up_runs_the_floor_and_a_lossy_arm() -> None:
    seen: list[Arm] = []

    def record(body: dict[str, Any], arm: Arm) -> Any:
        seen.append(arm)

    warm_up(record)
    assert seen == [FLOOR_ARM, WARM_LOSSY_ARM]
    assert WARM_LOSSY_ARM.method == "prune"


def test_compresses_with_a_policy_or_an_override(tmp_path: Any) -> None:
    assert not ProxySettings().compresses
    assert ProxySettings(policy_path=tmp_path / "policy.json").compresses
    assert ProxySettings(override_arm=Arm("prune", 0.5)).compresses


_AFTER_SETTLING = """
import gc, sys
from tokenlens.compress.arms import Arm
from tokenlens.proxy.apply import default_compressor, settle_process
settle_process({compressing})
body = {{"model": "m", "max_tokens": 1, "messages": [{{"role": "user", "content": [
    {{"type": "text", "text": "Some words here and there, many words.\\n\\nMore words.\\n"}},
    {{"type": "text", "text": "Why?"}}]}}]}}
print("numpy" in sys.modules, gc.get_freeze_count() > 0, end=" ")
default_compressor()(body, Arm("prune", 0.5))
gc.collect()
print(len(gc.get_objects()))
"""


def _settled(compressing: bool) -> tuple[bool, bool, int]:
    code = _AFTER_SETTLING.format(compressing=compressing)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    numpy, frozen, alive = result.stdout.split()
    return numpy == "True", frozen == "True", int(alive)


def test_a_compressing_process_freezes_what_its_first_lossy_request_would_load() -> None:
    numpy, frozen, alive = _settled(True)
    assert numpy and frozen
    # the first prune request loads nothing a full collection would scan again (numpy
    # imported after the freeze would leave thousands of objects outside it)
    assert alive < 500


def test_a_pass_through_process_freezes_without_loading_the_codec() -> None:
    numpy, frozen, _ = _settled(False)
    assert frozen and not numpy

"""The tool-output rungs in the plug-in shape (a Messages body -> a Messages body).

Apart from `body.py` because it calls `compress_request`, which itself imports `body.py`:
benches, `tokenlens fidelity` and the per-kind arm picker grade the rungs through the same
seam as any external compressor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenlens.compress.arms import Arm
from tokenlens.compress.request import compress_request
from tokenlens.compress.toolout.kinds import KINDS
from tokenlens.compress.toolout.rungs import ToolArm


class ToolArmCompressor:
    """One tool arm for every kind as a body -> body callable: the plug-in shape
    (`tokenlens.compress.external.register`), so benches and `tokenlens fidelity` grade
    the tool-output rungs with the same instrument as any external compressor."""

    def __init__(self, arm: ToolArm) -> None:
        self.arm = arm

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        arms = dict.fromkeys(KINDS, self.arm)
        return compress_request(body, Arm("control"), tool_arms=arms).body


class ToolArmsCompressor:
    """Per-kind tool arms (a policy's ``tool_output`` entries) as a body -> body callable:
    each tool_result gets its own kind's arm, as the proxy applies them; kinds without an
    arm are left alone."""

    def __init__(self, arms: Mapping[str, ToolArm]) -> None:
        self.arms = dict(arms)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return compress_request(body, Arm("control"), tool_arms=self.arms).body

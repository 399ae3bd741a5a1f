"""The tool-output rungs in the plug-in shape (a Messages body -> a Messages body).

Benches, `tokenlens fidelity`, the model-free per-kind pre-check and a calibration (as the
arms ``ext:tools-<rung>``, `tokenlens.compress.external`) grade the rungs through the same
seam as any external compressor. It calls `compress_tool_results` directly, not
`compress_request` (which reaches the plug-ins through `tokenlens.compress.external`):
with the text arm `control`, that is all `compress_request` would do to the body.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tokenlens.compress.toolout.body import compress_tool_results
from tokenlens.compress.toolout.kinds import KINDS
from tokenlens.compress.toolout.rungs import ToolArm


class ToolArmCompressor:
    """One tool arm for every kind as a body -> body callable: the plug-in shape
    (`tokenlens.compress.external.register`), so benches and `tokenlens fidelity` grade
    the tool-output rungs with the same instrument as any external compressor."""

    def __init__(self, arm: ToolArm) -> None:
        self.arm = arm

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return _compressed(body, dict.fromkeys(KINDS, self.arm))


class ToolArmsCompressor:
    """Per-kind tool arms (a policy's ``tool_output`` entries) as a body -> body callable:
    each tool_result gets its own kind's arm, as the proxy applies them; kinds without an
    arm are left alone."""

    def __init__(self, arms: Mapping[str, ToolArm]) -> None:
        self.arms = dict(arms)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return _compressed(body, self.arms)


def _compressed(body: dict[str, Any], arms: Mapping[str, ToolArm]) -> dict[str, Any]:
    new = copy.deepcopy(body)  # the caller's body is never changed
    compress_tool_results(new, arms)
    return new

"""The tool-output rungs in the plug-in shape (a Messages body -> a Messages body).

Apart from `body.py` because it calls `compress_request`, which itself imports `body.py`:
benches, `tokenlens fidelity` and the per-kind arm picker grade the rungs through the same
seam as any external compressor.
"""

from __future__ import annotations

from typing import Any

from tokenlens.compress.arms import Arm
from tokenlens.compress.request import compress_request
from tokenlens.compress.toolout.kinds import KINDS
from tokenlens.compress.toolout.rungs import ToolArm

#: The rungs shipped as named external arms (``ext:tools-lossless``, ``ext:tools-elide-0.7``;
#: `tokenlens.compress.external.BUILTIN`), so a calibration measures them on answers to the
#: agent set: `safe`, `minify`, `prune` and the other text rungs leave tool output alone.
TOOL_PLUGINS: dict[str, str] = {
    "tools-lossless": "lossless",
    **{f"tools-elide-{rate}": f"elide@{rate}" for rate in ("0.9", "0.7", "0.5", "0.3")},
}


class ToolArmCompressor:
    """One tool arm for every kind as a body -> body callable: the plug-in shape
    (`tokenlens.compress.external.register`), so benches and `tokenlens fidelity` grade
    the tool-output rungs with the same instrument as any external compressor."""

    def __init__(self, arm: ToolArm) -> None:
        self.arm = arm

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        arms = dict.fromkeys(KINDS, self.arm)
        return compress_request(body, Arm("control"), tool_arms=arms).body


def tools_lossless(body: dict[str, Any]) -> dict[str, Any]:
    """``ext:tools-lossless``: every tool output rewritten losslessly."""
    return ToolArmCompressor(ToolArm.parse(TOOL_PLUGINS["tools-lossless"]))(body)


def _elide(rate: str) -> Any:
    rung = ToolArmCompressor(ToolArm.parse(TOOL_PLUGINS[f"tools-elide-{rate}"]))

    def compress(body: dict[str, Any]) -> dict[str, Any]:
        return rung(body)

    compress.__doc__ = f"``ext:tools-elide-{rate}``: every tool output at elide@{rate}."
    return compress


tools_elide_09 = _elide("0.9")
tools_elide_07 = _elide("0.7")
tools_elide_05 = _elide("0.5")
tools_elide_03 = _elide("0.3")

"""Settings of the compressor that are not part of an arm (which model, which device)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tokenlens.config import DEFAULT_LLMLINGUA_MODEL


class CompressSettings(BaseModel):
    """How to run the ladder here. Arms say *what* to do; settings say *with what*.

    Attributes:
        llmlingua_model: hub name or local directory of the LLMLingua-2 token classifier.
        device: torch device for LLMLingua-2 (``cpu``, ``cuda``, ``mps``).
        compress_system: let lossy rungs (3-5) rewrite the system prompt. Off by default:
            a system prompt carries instructions, and instructions are never compressed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    llmlingua_model: str = DEFAULT_LLMLINGUA_MODEL
    device: str = "cpu"
    compress_system: bool = False

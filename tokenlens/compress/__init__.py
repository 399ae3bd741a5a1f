"""The compression ladder. `compress_request` is the one entry point the proxy and the
calibration share; see `tokenlens.compress.request`.

Importing this package is cheap: LLMLingua-2 (torch, transformers) loads only when the
`llmlingua2` arm first runs (`tokenlens.compress.lingua`).
"""

from tokenlens.compress.arms import CONTROL, METHODS, RATED_METHODS, Arm, build_ladder
from tokenlens.compress.ladder import TextResult, compress_text
from tokenlens.compress.request import compress_request
from tokenlens.compress.result import CompressionResult
from tokenlens.compress.settings import CompressSettings

__all__ = [
    "CONTROL",
    "METHODS",
    "RATED_METHODS",
    "Arm",
    "CompressSettings",
    "CompressionResult",
    "TextResult",
    "build_ladder",
    "compress_request",
    "compress_text",
]

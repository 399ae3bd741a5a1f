"""The compression ladder. `compress_request` is the one entry point the proxy and the
calibration share; see `tokenlens.compress.request`."""

from tokenlens.compress.arms import CONTROL, METHODS, RATED_METHODS, Arm, build_ladder

__all__ = ["CONTROL", "METHODS", "RATED_METHODS", "Arm", "build_ladder"]

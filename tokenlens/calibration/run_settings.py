"""Which settings two runs were measured with, and which differ: for `history`, `compare`
and the trend artifact, so one timeline never silently mixes judges or tolerances.

A run is read through its manifest's recorded config and its policy (model, deciding
judge, tolerance, mode as published).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tokenlens.formatting import pct

if TYPE_CHECKING:
    from tokenlens.calibration.runs import RunManifest
    from tokenlens.policy import Policy


class RunState(Protocol):
    """What this module reads of a finished run (`history.RunState` is one): its manifest
    and its policy. A protocol, so history can import this module and not the reverse."""

    @property
    def manifest(self) -> RunManifest: ...

    @property
    def policy(self) -> Policy: ...


__all__ = [
    "INSTRUMENT_SETTINGS",
    "instrument_changes",
    "mixed_settings",
    "run_settings",
    "settings_changes",
]


#: Recorded settings that change what a run's numbers mean or how they were decided
#: (`CalibrationConfig` keys); the rest (concurrency, spend cap, where files go, the seed,
#: the policy age limit) do not, and are not compared.
COMPARED_SETTINGS = (
    "tasks",
    "classes",
    "max_tasks_per_class",
    "shortest_tasks_first",
    "methods",
    "rates",
    "repeats",
    "backend",
    "max_tokens",
    "temperature",
    "judge_both_orders",
    "judge_twice",
    "design",
    "reanswer",
    "llmlingua_model",
)
#: What a setting recorded by a run from before it existed was (it read as this).
RECORDED_BEFORE = {"reanswer": False}
#: Settings whose change makes two runs' readings incomparable (another instrument): no
#: interval is flagged as "moved" across such a change.
INSTRUMENT_SETTINGS = ("model", "backend", "judge")


def run_settings(state: RunState) -> dict[str, Any]:
    """What a run measured with: the policy's model, deciding judge, tolerance and mode,
    then the recorded settings of `COMPARED_SETTINGS`."""
    config = state.manifest.config
    found: dict[str, Any] = {
        "model": state.policy.model,
        "judge": state.policy.judge,
        "judges": config.get("judge"),
        "tolerance": state.policy.tolerance,
        "mode": state.policy.mode,
    }
    found.update({key: config.get(key, RECORDED_BEFORE.get(key)) for key in COMPARED_SETTINGS})
    return found


def _setting_text(key: str, value: Any) -> str:
    if key == "tolerance" and isinstance(value, int | float):
        return pct(float(value))
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or "[]"
    return "none" if value is None else str(value)


def settings_changes(a: RunState, b: RunState) -> dict[str, str]:
    """Setting -> `before → after`, for every compared setting that differs."""
    before, after = run_settings(a), run_settings(b)
    return {
        key: f"{_setting_text(key, before[key])} → {_setting_text(key, after[key])}"
        for key in before
        if before[key] != after.get(key)
    }


def instrument_changes(changed: Mapping[str, str]) -> list[str]:
    """The settings among `changed` that make two runs' readings another instrument's
    (model, backend, judge): `history` and `compare` then flag no interval as moved."""
    return [key for key in INSTRUMENT_SETTINGS if key in changed]


def mixed_settings(states: Sequence[RunState]) -> list[str]:
    """`judge: metric (2 runs), claude-haiku-4-5 (1 run)` per setting that is not the same
    in every run shown: one timeline, but not one instrument or rule."""
    lines = []
    values = [run_settings(state) for state in states]
    for key in values[0] if values else {}:
        seen: dict[str, int] = {}
        for found in values:
            text = _setting_text(key, found.get(key))
            seen[text] = seen.get(text, 0) + 1
        if len(seen) > 1:
            counts = ", ".join(
                f"{text} ({n} run{'s' if n > 1 else ''})" for text, n in seen.items()
            )
            lines.append(f"{key}: {counts}")
    return lines

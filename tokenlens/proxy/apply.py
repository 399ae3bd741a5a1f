"""Which arm a request gets, and compressing it within a time budget, failing open.

Why this is separate from the relay: the rules (✓ applies, ? only when allowed, — never
beyond `safe`, a judged regression falls back) are plain functions tested without a
server, and the relay only asks "what body do I send?".
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import anyio.to_thread

from tokenlens.compress.arms import Arm
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.policy import Policy, PolicyEntry
from tokenlens.proxy.settings import FLOOR_ARM, ProxySettings

log = logging.getLogger("tokenlens.proxy")


class CompressedBody(Protocol):
    """The fields of `tokenlens.compress.CompressionResult` the proxy reads."""

    @property
    def body(self) -> dict[str, Any]: ...
    @property
    def original_tokens(self) -> int: ...
    @property
    def compressed_tokens(self) -> int: ...
    @property
    def tokens_saved(self) -> int: ...


#: `(body, arm)`, or `(body, arm, tool_arms)` when tool-output arms apply.
Compressor = Callable[..., CompressedBody]
#: The text arm of a request that gets tool-output arms only.
CONTROL_ARM = Arm("control")


def default_compressor() -> Compressor:
    """The calibration's own `compress_request`: the proxy never compresses differently."""
    from tokenlens.compress import compress_request

    def run(
        body: dict[str, Any], arm: Arm, tool_arms: Mapping[str, ToolArm] | None = None
    ) -> CompressedBody:
        result = compress_request(body, arm, tool_arms=tool_arms)
        if result.rewritten:
            # Counted here, in the worker thread: `compress_request` counts nothing, and
            # the handler's no-gain check and savings figures must not count on the loop.
            _ = result.tokens_saved, result.compressed_tokens, result.tool_tokens_saved
        return result

    return run


#: The lossy arm `warm_up` runs besides the floor: its first call imports numpy and
#: prune's word tables (~65 ms), which must not land inside a request's time budget.
WARM_LOSSY_ARM = Arm("prune", 0.5)


def warm_up(compressor: Compressor) -> None:
    """Run the codec on a tiny body, with the floor arm and a lossy one, so its one-time
    loads (the tokenizer's BPE table, ~0.25 s; numpy and the word tables, ~65 ms) happen at
    startup, not inside the first request's time budget."""
    body = {
        "model": "warm-up",
        "max_tokens": 1,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "a  b\n\n"}, {"type": "text", "text": "c?"}],
            }
        ],
    }
    try:
        for arm in (FLOOR_ARM, WARM_LOSSY_ARM):
            compressor(body, arm)
    except Exception as exc:  # a broken codec shows up per request, as fail-opens
        log.warning("compressor warm-up failed (%s)", type(exc).__name__)


def settle_process(compressing: bool) -> None:
    """Once per proxy process (`serve`, and each `--workers` worker), after the app is
    built and before it serves: load what compressing needs (`warm_up`, when the proxy
    compresses), then exempt every object alive from the cyclic garbage collector's scans
    (`gc.collect`, `gc.freeze`).

    Why: a 100k-token request allocates thousands of containers (a dozen young
    collections), enough to start a full collection every ten or so such requests, and a
    full collection scans every tracked object of the process. Measured on
    `compress_request` with prune@0.5 at 100k tokens: 12-54 ms per full collection with
    nothing frozen (by what the process imported: 20-33 ms with the proxy's app), 2-3 ms
    with the start-up heap frozen but numpy imported later (at the first lossy request),
    0.2-0.6 ms with numpy loaded before the freeze (docs/ladder.md, issue 27 goal 4).
    Objects made later are scanned as usual; frozen ones are never freed, which start-up
    objects never are. `bench/bench_ladder.py` calls this too, so its figures are the
    proxy's."""
    if compressing:
        warm_up(default_compressor())
    gc.collect()
    gc.freeze()


@dataclass(frozen=True)
class ArmChoice:
    """The arm a request gets (None: forward the original bytes) and why, for the dashboard."""

    arm: Arm | None
    why: str


def fallback_arm(arm: Arm | None) -> Arm | None:
    """Where a class goes when its live retention drops: `safe`, or nothing if already there."""
    if arm is None or arm == FLOOR_ARM:
        return None
    return FLOOR_ARM


def policy_arm(
    entry: PolicyEntry, *, allow_provisional: bool, now: datetime | None = None
) -> ArmChoice:
    """The arm a policy entry allows: ✓ applies; ? only when allowed; — at most `safe`;
    an entry past its age limit (`PolicyEntry.expires_at`) is treated as —."""
    arm = entry.arm
    if arm is not None and entry.expired(now or datetime.now(UTC)):
        return ArmChoice(FLOOR_ARM, "past its age limit (not re-certified): safe only")
    if entry.verdict == "measured" and arm is not None:
        return ArmChoice(arm, "measured")
    if entry.verdict == "provisional" and arm is not None:
        if allow_provisional:
            return ArmChoice(arm, "provisional (allowed)")
        return ArmChoice(FLOOR_ARM, "provisional not allowed: safe only")
    return ArmChoice(FLOOR_ARM, "no arm proven: safe only")


def choose_arm(
    policy: Policy | None,
    task_class: str,
    *,
    override: Arm | None,
    allow_provisional: bool,
    fallen_back: bool,
    now: datetime | None = None,
) -> ArmChoice:
    """The whole rule, in precedence order: override, no policy, fallback, policy entry."""
    if override is not None:
        choice = ArmChoice(override, "--compress override")
    elif policy is None:
        return ArmChoice(None, "no policy")
    else:
        choice = policy_arm(
            policy.entry_for(task_class), allow_provisional=allow_provisional, now=now
        )
    if fallen_back:
        return ArmChoice(fallback_arm(choice.arm), "live retention below bar: fallback")
    return choice


@dataclass(frozen=True)
class Outcome:
    """What compression produced: a body to send, or the fail-open reason."""

    result: CompressedBody | None
    elapsed_ms: float
    fail_open: str | None = None


#: What a kind of tool output may still get when its entry allows no more: the lossless
#: rung (it only removes what a terminal never shows, or rewrites with an exact decode).
TOOL_FLOOR_ARM = ToolArm("lossless")


def tool_arm_choice(
    entry: PolicyEntry, *, allow_provisional: bool, now: datetime | None = None
) -> ToolArm | None:
    """A tool-output entry's arm, by the class rules: ✓ applies, ? only when allowed, — and
    an entry past its age limit get the lossless floor, except a — whose walk refused its
    gentlest rung (cause ``no_arm_held``: measured to fail there): None, left as it came."""
    arm = entry.tool_arm
    if arm is None and entry.cause == "no_arm_held":
        return None
    if arm is None or entry.expired(now or datetime.now(UTC)):
        return TOOL_FLOOR_ARM
    if entry.verdict == "measured" or (entry.verdict == "provisional" and allow_provisional):
        return arm
    return TOOL_FLOOR_ARM


def tool_arms_for(
    policy: Policy | None, settings: ProxySettings, now: datetime | None = None
) -> dict[str, ToolArm]:
    """The tool-output arms by kind: `--compress-tools`, else the policy's `tool_output`
    entries (a kind without one, or refused even its gentlest rung, is left alone)."""
    if settings.override_tool_arms is not None:
        return dict(settings.override_tool_arms)
    if policy is None or not policy.tool_output:
        return {}
    allow = settings.allow_provisional
    arms = {
        kind: tool_arm_choice(entry, allow_provisional=allow, now=now)
        for kind, entry in policy.tool_output.items()
    }
    return {kind: arm for kind, arm in arms.items() if arm is not None}


def count_tool_policy_changes(
    policy: Policy, settings: ProxySettings, on_change: Callable[[], None]
) -> Callable[[Policy], None]:
    """A policy-reload listener calling `on_change` when the tool-output arms in force change:
    the one event that makes the proxy rewrite a prefix it sent before differently."""
    in_force = [tool_arms_for(policy, settings)]

    def listener(new: Policy) -> None:
        arms = tool_arms_for(new, settings)
        if arms != in_force[0]:
            in_force[0] = arms
            on_change()

    return listener


async def compress_within(
    compressor: Compressor,
    body: dict[str, Any],
    arm: Arm,
    budget_ms: float,
    *,
    tool_arms: Mapping[str, ToolArm] | None = None,
) -> Outcome:
    """Run the compressor in a worker thread; give up after `budget_ms` or on any error.

    A worker thread keeps a slow arm from stalling every other request on the loop. When
    the budget runs out the thread is abandoned (its result discarded), never awaited.
    Exceptions are reported by type only: their messages may quote the prompt.
    """
    start = time.perf_counter()
    result: CompressedBody | None = None
    try:
        with anyio.move_on_after(budget_ms / 1000):
            args = (body, arm, tool_arms) if tool_arms else (body, arm)
            result = await anyio.to_thread.run_sync(compressor, *args, abandon_on_cancel=True)
    except Exception as exc:  # fail open on anything the codec does
        elapsed = (time.perf_counter() - start) * 1000
        log.warning("compression failed open (%s, arm %s)", type(exc).__name__, arm.key)
        return Outcome(None, elapsed, f"error:{type(exc).__name__}")
    elapsed = (time.perf_counter() - start) * 1000
    if result is None:
        log.warning("compression failed open (over %.0f ms budget, arm %s)", budget_ms, arm.key)
        return Outcome(None, elapsed, "budget")
    return Outcome(result, elapsed)

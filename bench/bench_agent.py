"""TokenLens arms and external compressors side by side on agent traffic, in one table.

For each kind of tool output in the agent set (search hits, listings, file reads, JSON,
logs and test runs, version control) and for each arm: tool-output token reduction,
whole-body reduction, fabricated lines, unmarked drops and facts lost (the fidelity
check, `tokenlens.fidelity`), and the median CPU per request (this process's, plus the
worker's when an external compressor runs in another Python). All figures come from one
run. External arms go through the same plug-in seam as any user's (``ext:<name>``,
`tokenlens.compress.external`); an arm whose package is not reachable says so.

    .venv/bin/python bench/bench_agent.py [--tasks PATH] [--per-kind N]
        [--headroom-python /tmp/headroom-venv/bin/python]
        [--llmtrim-python /tmp/llmtrim-venv/bin/python] [--quick]

headroom-ai runs twice: with its library defaults (``ext:headroom``) and with
``protect_recent=0`` (``ext:headroom-all``: no message is protected from compression).
llmtrim leaves the prefix up to the last ``cache_control`` breakpoint alone, which on an
agent's body is everything: ``ext:llmtrim-uncached`` runs it on the body with the
breakpoints taken out, to show what it does to tool output. All run offline
(``HF_HUB_OFFLINE=1``, ``HEADROOM_OFFLINE=1``): headroom's Kompress text model, which
needs the hub, is then not used.

Before the table, the per-kind walk of `tokenlens tool-policy` runs on the same tasks
(`tokenlens.decision.tool_output`); its chosen arms, applied per kind as the proxy would
(``ext:tools-policy``), are the table's ``policy-applied arms`` rows, beside headroom-ai's
in the same run.

`--quick` runs two tasks of each kind through two arms (the test suite runs it).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from tokenlens.compress import Arm
from tokenlens.compress.external import Compressor, register
from tokenlens.compress.external.adapters import Adapter, llmtrim
from tokenlens.compress.toolout.plugin import ToolArmCompressor, ToolArmsCompressor
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.fidelity_run import HEADER, ArmTotals, measure, table_row
from tokenlens.tasks import AGENT_TASKS_PATH, load_tasks
from tokenlens.testing.prompt_cache import without_breakpoints

OURS = ("safe", "minify", "dedup", "prune@0.5", "select@0.5")


#: The tool-output rungs (`tokenlens.compress.toolout`), registered as plug-in arms.
TOOL_ARMS = ("lossless", "elide@0.7", "elide@0.5", "elide@0.3")


def _tool_arms(quick: bool) -> list[Arm]:
    arms = []
    for text in TOOL_ARMS[:2] if quick else TOOL_ARMS:
        name = "tools-" + text.replace("@", "-")
        register(name, ToolArmCompressor(ToolArm.parse(text)))
        arms.append(Arm.parse(f"ext:{name}"))
    return arms


def _policy_arm(by_kind: dict[str, list[tuple[dict, tuple]]]) -> Arm:
    """The tool-policy walk on these tasks; its per-kind arms registered as one arm."""
    from tokenlens.decision.tool_output import by_block_kind, decide_tool_output

    entries, walks = decide_tool_output(by_block_kind([r for rs in by_kind.values() for r in rs]))
    arms = {}
    for kind, entry in entries.items():
        walked = ", ".join(
            f"{r.rung} {r.reduction:.1%} ({r.report.facts_lost} lost)" for r in walks[kind]
        )
        print(
            f"tool-policy walk {kind:<10} {walked} -> {entry.mark} {entry.method}"
            + (f"@{entry.rate:g}" if entry.rate is not None else "")
        )
        arm = entry.tool_arm
        if arm is not None:
            arms[kind] = arm
    register("tools-policy", ToolArmsCompressor(arms))
    return Arm.parse("ext:tools-policy")


def _arms(args: argparse.Namespace, by_kind: dict[str, list[tuple[dict, tuple]]]) -> list[Arm]:
    arms = [Arm.parse(text) for text in (OURS[:1] + OURS[3:4] if args.quick else OURS)]
    arms += _tool_arms(args.quick)
    arms.append(_policy_arm(by_kind))
    if args.headroom_python:
        os.environ["TOKENLENS_HEADROOM_PYTHON"] = args.headroom_python
    if args.llmtrim_python:
        os.environ["TOKENLENS_LLMTRIM_PYTHON"] = args.llmtrim_python
    if not args.quick:
        register(
            "headroom-all",
            Adapter("headroom", "headroom", "pip install headroom-ai", {"protect_recent": 0}),
        )
        register("llmtrim-uncached", _Uncached(llmtrim))
        names = ("headroom", "headroom-all", "llmtrim", "llmtrim-uncached")
        arms += [Arm.parse(f"ext:{name}") for name in names]
    return arms


class _Uncached:
    """A compressor run on the body without its cache breakpoints (llmtrim leaves everything
    up to the last ``cache_control`` alone, so on an agent's body it touches nothing)."""

    def __init__(self, inner: Compressor) -> None:
        self.inner = inner

    @property
    def last_cpu_s(self) -> float | None:
        """The worker's CPU of the last call (see `tokenlens.fidelity_run.run_arm`)."""
        return getattr(self.inner, "last_cpu_s", None)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.inner(without_breakpoints(body))


def _synthetic_body() -> dict[str, Any]:
    listing = "\n".join(f"-rw-r--r-- 1 root root {n:>5} Dec  5 03:53 f{n}.py" for n in range(50))
    result = {"type": "tool_result", "tool_use_id": "t1", "content": listing}
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "What is in this folder?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
            },
            {"role": "user", "content": [result, {"type": "text", "text": "Which is largest?"}]},
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=Path, default=AGENT_TASKS_PATH)
    parser.add_argument("--per-kind", type=int, default=0, help="at most N tasks per kind")
    parser.add_argument("--headroom-python", default=None)
    parser.add_argument("--llmtrim-python", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    per_kind = 2 if args.quick else args.per_kind
    by_kind: dict[str, list[tuple[dict, tuple]]] = defaultdict(list)
    if args.quick and not args.tasks.exists():
        by_kind["synthetic"] = [(_synthetic_body(), ())]  # before the agent set is installed
    for task in load_tasks(args.tasks) if args.tasks.exists() or not args.quick else ():
        if task.body is None or (per_kind and len(by_kind[task.task_class]) >= per_kind):
            continue
        body = task.to_request(model="claude-sonnet-4-5")
        by_kind[task.task_class].append((body, tuple(task.facts)))
    load = os.getloadavg()
    print(
        f"bench_agent: {args.tasks}, {sum(map(len, by_kind.values()))} requests, "
        f"{datetime.date.today()}, {os.cpu_count()} cores, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    arms = _arms(args, by_kind)
    print(f"{'kind':<16}{HEADER}")
    overall: dict[str, ArmTotals] = {}
    for kind in sorted(by_kind):
        for row in measure(arms, by_kind[kind]):
            print(f"{kind:<16}{table_row(row)}")
            before = overall.get(row.arm)
            overall[row.arm] = row if before is None else before.merged(row)
        print(flush=True)
    for row in overall.values():
        print(f"{'all':<16}{table_row(row)}")
    policy = overall.get("ext:tools-policy")
    if policy is not None:
        print(f"{'all':<16}{table_row(policy, 'policy-applied arms')}")
    print()
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

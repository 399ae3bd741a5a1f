"""Agent traffic through `tokenlens serve` beside `headroom proxy`, same loopback upstream.

Run by `bench/bench_proxy.py --peer headroom` (or alone). Targets, each with its own
loopback upstream (`tokenlens.testing.FakeAnthropic`) so what each one sent can be read
back: direct (no proxy), `tokenlens serve` pass-through, `tokenlens serve
--compress-tools ARM`, and `headroom proxy` (headroom-ai in a throwaway virtualenv,
offline: ``HEADROOM_OFFLINE=1``, ``HF_HUB_OFFLINE=1``, no semantic cache, no rate limit).
Requests cycle through the targets one by one, so all see the same machine load.

Printed per target: added latency p50/p99 over direct, CPU per request (the proxy
process's, from /proc), start-up seconds, RSS after the run, and the tool-output tokens
the upstream received against what was sent, with the fidelity check's fabricated lines
and unmarked drops on what each proxy forwarded. A second table: the proxy's added
latency on one ~50k-token agent body, sent repeatedly (a conversation resends its
prefix every turn), compressing against pass-through.

    .venv/bin/python bench/bench_proxy_agent.py [--headroom-python PY] [--no-peer]
        [--tool-arm elide@0.5] [--requests 3] [--per-kind 10] [--big 30] [--quick]
        [--baseline DIR]

`--baseline DIR` (e.g. ``git archive main tokenlens | tar -x -C DIR``) runs that tree's
`tokenlens serve --compress-tools` beside ours, in the same run: on a busy machine the
two compare where absolute figures cannot.

Each upstream answers every request with the same short message, so upstream time does
not depend on the body a proxy forwarded. Bodies: the agent task set when present
(`tasks_data/agent/`), else the recorded 20-turn session (`tests/proxy/data/agent_session.json`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tokenlens.fidelity import check_body, tool_outputs
from tokenlens.testing import FakeAnthropic
from tokenlens.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
SESSION = ROOT / "tests" / "proxy" / "data" / "agent_session.json"
AGENT_SET = ROOT / "tasks_data" / "agent"
HEADERS = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}


class CannedFake(FakeAnthropic):
    """The loopback upstream recording every body, with one fixed short answer: making a
    real-looking answer reads the whole prompt, which would charge a smaller (compressed)
    body less upstream time and make a proxy look faster than going direct."""

    def _message(self, body: dict[str, Any], *, bad_json: bool = False) -> dict[str, Any]:
        return {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def session_body(turns: int | None = None, copies: int = 1) -> dict[str, Any]:
    """The recorded session as one request (its last `turns` turns, `copies` times over)."""
    session = json.loads(SESSION.read_text(encoding="utf-8"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": session["ask"]}]
    chosen = session["turns"][:turns] if turns else session["turns"]
    for copy in range(copies):
        for n, turn in enumerate(chosen):
            use_id = f"toolu_01Bench{copy:02d}Turn{n:03d}Xq"  # shaped as the API's ids
            command = {"command": turn["command"]}
            use = {"type": "tool_use", "id": use_id, "name": "bash", "input": command}
            messages.append({"role": "assistant", "content": [use]})
            result = {"type": "tool_result", "tool_use_id": use_id, "content": turn["output"]}
            messages.append({"role": "user", "content": [result]})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    bash = {"name": "bash", "input_schema": {"type": "object"}}
    return {"model": "claude-haiku-4-5", "max_tokens": 16, "tools": [bash], "messages": messages}


def agent_bodies(limit: int, folder: Path = AGENT_SET) -> list[dict[str, Any]]:
    """Bodies of the agent set (`limit` per file), else the session cut at each turn."""
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    bodies: list[dict[str, Any]] = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines()[:limit]:
            task = json.loads(line)
            if task.get("body"):
                bodies.append({"model": "claude-haiku-4-5", "max_tokens": 16, **task["body"]})
    return bodies or [session_body(turns=n) for n in range(2, 21, 2)]


def wait_up(process: subprocess.Popen[bytes], url: str, name: str) -> float:
    started = time.perf_counter()
    while True:
        try:
            httpx.get(url, timeout=1)
            return time.perf_counter() - started
        except httpx.HTTPError:
            if process.poll() is not None:
                raise SystemExit(f"{name} exited during start-up") from None
            if time.perf_counter() - started > 180:
                raise SystemExit(f"{name} did not start in 180 s") from None
            time.sleep(0.05)


def start_tokenlens(
    upstream: str, extra: list[str], source: Path | None = None
) -> tuple[subprocess.Popen[bytes], str, float]:
    """`source`: a folder holding another `tokenlens` package to run instead (``python -m``
    puts the working folder first on the path)."""
    port = free_port()
    command = [sys.executable, "-m", "tokenlens", "serve", "--upstream", upstream]
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=source,
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(process, f"{url}/tokenlens/feed.json", "tokenlens serve")
    return process, url, time.perf_counter() - started


def start_headroom(python: Path, upstream: str) -> tuple[subprocess.Popen[bytes], str, float]:
    port = free_port()
    env = {
        **os.environ,
        "HEADROOM_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HEADROOM_TELEMETRY": "off",
        "ANTHROPIC_TARGET_API_URL": upstream,
    }
    env.pop("PYTHONPATH", None)
    command = [str(python.parent / "headroom"), "proxy", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--no-cache", "--no-rate-limit"]
    command += ["--anthropic-api-url", upstream]
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(process, f"{url}/health", "headroom proxy")
    return process, url, time.perf_counter() - started


#: The peer's version, pinned; its proxy needs the `proxy` extra (fastapi, uvicorn).
HEADROOM_SPEC = "headroom-ai[proxy]==0.42.0"
HEADROOM_VENV = Path.home() / ".cache" / "tokenlens" / "bench-headroom"


def headroom_python() -> Path:
    """The python of a bench-only virtualenv holding headroom-ai's proxy, made on first use."""
    python = HEADROOM_VENV / "bin" / "python"
    if (HEADROOM_VENV / "bin" / "headroom").exists():
        return python
    print(f"installing {HEADROOM_SPEC} into {HEADROOM_VENV} (once; a few minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(HEADROOM_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", HEADROOM_SPEC], check=True)
    return python


def cpu_seconds(pid: int) -> float:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def tool_tokens(body: dict[str, Any]) -> int:
    return sum(estimate_tokens(out.text) for out in tool_outputs(body).values())


def run(args: argparse.Namespace) -> None:
    names = ["direct", "passthrough", "tokenlens"] + (["baseline"] if args.baseline else [])
    names += ["headroom"] if args.headroom_python else []
    fakes = {name: CannedFake(require_key=False).start() for name in names}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    urls = {"direct": fakes["direct"].base_url}
    startup: dict[str, float] = {}
    try:
        procs["passthrough"], urls["passthrough"], startup["passthrough"] = start_tokenlens(
            fakes["passthrough"].base_url, []
        )
        compressing = ["--compress-tools", args.tool_arm, "--compress-budget-ms", "10000"]
        procs["tokenlens"], urls["tokenlens"], startup["tokenlens"] = start_tokenlens(
            fakes["tokenlens"].base_url, compressing
        )
        if args.baseline:
            procs["baseline"], urls["baseline"], startup["baseline"] = start_tokenlens(
                fakes["baseline"].base_url, compressing, args.baseline.resolve()
            )
        if args.headroom_python:
            procs["headroom"], urls["headroom"], startup["headroom"] = start_headroom(
                Path(args.headroom_python), fakes["headroom"].base_url
            )
        bodies = agent_bodies(args.per_kind, args.tasks)
        latency: dict[str, list[float]] = {name: [] for name in names}
        cpu0 = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        with httpx.Client(timeout=120) as client:
            for _ in range(args.requests):
                for body in bodies:
                    for name in names:
                        started = time.perf_counter()
                        reply = client.post(f"{urls[name]}/v1/messages", json=body, headers=HEADERS)
                        latency[name].append((time.perf_counter() - started) * 1000)
                        if reply.status_code != 200:
                            raise SystemExit(
                                f"{name}: HTTP {reply.status_code}: {reply.text[:200]}"
                            )
        count = len(bodies) * args.requests
        cpu = {name: (cpu_seconds(p.pid) - cpu0[name]) * 1000 / count for name, p in procs.items()}
        load = os.getloadavg()[0]
        print(f"\n## agent traffic beside headroom proxy ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")
        print(
            f"{len(bodies)} agent bodies x {args.requests}; tool arm {args.tool_arm}; "
            f"load average {load:.2f}, {os.cpu_count()} cores"
        )
        print(
            "| target | added p50 ms | added p99 ms | CPU ms/req | start-up s | RSS MB | "
            "tool-output tokens saved | fabricated | unmarked |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for name in names[1:]:
            sent = [call.body for call in fakes[name].calls()][: len(bodies)]
            before = sum(tool_tokens(b) for b in bodies)
            after = sum(tool_tokens(s) for s in sent)
            report = None
            for original, forwarded in zip(bodies, sent, strict=True):
                one = check_body(original, forwarded)
                report = one if report is None else report + one
            assert report is not None
            added = [a - d for a, d in zip(latency[name], latency["direct"], strict=True)]
            print(
                f"| {name} | {pct(added, 50):.2f} | {pct(added, 99):.2f} | {cpu[name]:.2f} | "
                f"{startup[name]:.1f} | {rss_mb(procs[name].pid):.0f} | "
                f"{100 * (1 - after / before):.1f} % | {report.fabricated_lines} | "
                f"{report.unmarked_drops} |"
            )
        big(args, client_urls=urls, pids={n: p.pid for n, p in procs.items()})
    finally:
        for process in procs.values():
            process.terminate()
        for process in procs.values():
            process.wait(timeout=30)
        for fake in fakes.values():
            fake.stop()


def _fresh(body: dict[str, Any], stamp: str, *, newest_only: bool) -> dict[str, Any]:
    """`body` with its tool outputs made new (a first line naming `stamp`): every output,
    as on a conversation the proxy has not seen, or only the newest, as on a next turn."""
    fresh = json.loads(json.dumps(body))
    results = [
        block
        for message in fresh["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    for block in results[-1:] if newest_only else results:
        block["content"] = f"# {stamp}\n{block['content']}"
    return fresh


def big(args: argparse.Namespace, client_urls: dict[str, str], pids: dict[str, int]) -> None:
    """Added latency on one ~50k-token agent body: compressing vs pass-through, three ways.

    `repeat` resends the same body (every tool output already compressed once: the
    proxy's memo answers); `turn` makes only the newest output new (a conversation's next
    turn); `cold` makes every output new (a conversation the proxy has never seen).

    Beside wall-clock latency, each proxy's CPU time per request (from /proc): on a busy
    machine the CPU added is the steadier figure of the two."""
    body = session_body(copies=args.copies)
    tokens = sum(estimate_tokens(json.dumps(m)) for m in body["messages"])
    print(f"\n~{tokens} tokens body x {args.big} per mode, load average {os.getloadavg()[0]:.2f}")
    names = ["direct", "passthrough", "tokenlens"] + (["baseline"] if "baseline" in pids else [])
    with httpx.Client(timeout=120) as client:
        for name in names:  # the body once, untimed
            client.post(f"{client_urls[name]}/v1/messages", json=body, headers=HEADERS)
        for mode in ("repeat", "turn", "cold"):
            times: dict[str, list[float]] = {name: [] for name in names}
            cpu0 = {name: cpu_seconds(pids[name]) for name in names[1:]}
            for n in range(args.big):
                sent = (
                    body
                    if mode == "repeat"
                    else _fresh(body, f"{mode} {n}", newest_only=mode == "turn")
                )
                for name in times:
                    started = time.perf_counter()
                    reply = client.post(
                        f"{client_urls[name]}/v1/messages", json=sent, headers=HEADERS
                    )
                    if reply.status_code != 200:
                        raise SystemExit(f"{name}: HTTP {reply.status_code}: {reply.text[:200]}")
                    times[name].append((time.perf_counter() - started) * 1000)
            cpu = {n: (cpu_seconds(pids[n]) - t) * 1000 / args.big for n, t in cpu0.items()}
            for name in names[2:]:
                over = [t - p for t, p in zip(times[name], times["passthrough"], strict=True)]
                print(
                    f"{mode:6s} {name:9s}: passthrough p50 {pct(times['passthrough'], 50):.2f} "
                    f"ms, compressing p50 {pct(times[name], 50):.2f} ms: added over "
                    f"pass-through p50 {pct(over, 50):.2f} ms, p99 {pct(over, 99):.2f} ms (goal "
                    f"<= 3 ms p50); CPU/request {cpu['passthrough']:.2f} ms vs "
                    f"{cpu[name]:.2f} ms (+{cpu[name] - cpu['passthrough']:.2f} ms)"
                )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--headroom-python",
        default=None,
        help="python of a venv with headroom-ai[proxy] (default: made under ~/.cache/tokenlens)",
    )
    parser.add_argument("--tasks", type=Path, default=AGENT_SET, help="agent task folder")
    parser.add_argument("--no-peer", action="store_true", help="ours only, no headroom proxy")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few bodies, no peer")
    parser.add_argument("--tool-arm", default="elide@0.5", help="--compress-tools for ours")
    parser.add_argument("--requests", type=int, default=3, help="rounds over the bodies")
    parser.add_argument("--per-kind", type=int, default=10, help="agent tasks per kind")
    parser.add_argument("--big", type=int, default=30, help="sends of the ~50k-token body")
    parser.add_argument("--copies", type=int, default=4, help="session copies in the big body")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a folder holding another tokenlens package: compressing with it too, same run",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.per_kind, args.big, args.copies, args.no_peer = 1, 1, 3, 1, True
    if not args.no_peer and args.headroom_python is None:
        args.headroom_python = str(headroom_python())
    if args.no_peer:
        args.headroom_python = None
    run(args)


if __name__ == "__main__":
    main()

"""Throughput of each model-free rung and latency of `compress_request` on a ~2,000-token body.

Prints figures; asserts nothing (timing goals live here, never in tests). Wall time is
what a caller waits; CPU time (this process's) is printed beside it because on a shared
machine wall time mostly measures the neighbours: with the load average above the core
count, a 3 ms computation often waits 10 ms for its turn. Goals (issue 15): `safe` >= 20
MB/s; `compress_request` p50 <= 1 ms with `safe`, <= 5 ms with `prune`/`select`.

`compress_request` counts no tokens; the last line shows what reading the counts costs.

    .venv/bin/python bench/bench_ladder.py [--llmlingua-model PATH_OR_HUB_NAME] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from tokenlens.compress import Arm, CompressSettings, compress_request
from tokenlens.compress.dedup import apply_dedup
from tokenlens.compress.minify import apply_minify
from tokenlens.compress.prune import apply_prune
from tokenlens.compress.safe import apply_safe
from tokenlens.compress.select import apply_select
from tokenlens.config import DEFAULT_LLMLINGUA_MODEL
from tokenlens.errors import ArmUnavailable
from tokenlens.tokens import TOKENIZER_NOTE, estimate_tokens

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "ladder" / "data" / "guide.md"
QUESTION = "How do I roll back a failed deployment, and who owns staging?"


def corpus(target_bytes: int) -> str:
    """Distinct copies of the sample (numbered so dedup has real work, not only repeats)."""
    base = SAMPLE.read_text(encoding="utf-8")
    parts: list[str] = []
    size = 0
    i = 0
    while size < target_bytes:
        part = base.replace("Orchard", f"Orchard-{i}").replace("2021", str(1900 + i % 120))
        parts.append(part)
        size += len(part.encode())
        i += 1
    return "\n\n".join(parts)


def body_of_tokens(tokens: int) -> dict[str, object]:
    paragraphs = corpus(40_000).split("\n\n")
    kept: list[str] = []
    while estimate_tokens("\n\n".join(kept)) < tokens:
        kept.append(paragraphs[len(kept)])
    text = "\n\n".join(kept)
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 512,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": text}, {"type": "text", "text": QUESTION}],
            }
        ],
    }


def throughput(repeats: int) -> None:
    text = corpus(1_000_000)
    megabytes = len(text.encode()) / 1e6
    rungs = {
        "safe": apply_safe,
        "minify": apply_minify,
        "dedup": apply_dedup,
        "prune@0.5": lambda t: apply_prune(t, 0.5, QUESTION),
        "select@0.5": lambda t: apply_select(t, 0.5, QUESTION),
    }
    print(f"Throughput on {megabytes:.2f} MB of markdown (best of {repeats}, wall and CPU):")
    for name, rung in rungs.items():
        runs = [_timed(rung, text) for _ in range(repeats)]
        wall = min(w for w, _ in runs)
        cpu = min(c for _, c in runs)
        print(
            f"  {name:<12} {megabytes / wall:8.2f} MB/s  ({wall * 1000:5.0f} ms)   "
            f"CPU {megabytes / cpu:8.2f} MB/s  ({cpu * 1000:5.0f} ms)"
        )


def _timed(fn: Callable[[str], str], text: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(text)
    return time.perf_counter() - wall, time.process_time() - cpu


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(repeats: int, model: str) -> None:
    body = body_of_tokens(2_000)
    settings = CompressSettings(llmlingua_model=model)
    arms = ["control", "safe", "minify", "dedup", "prune@0.5", "select@0.5", "llmlingua2@0.5"]
    first = compress_request(body, Arm("control"))
    print(
        f"\ncompress_request latency on a {first.original_tokens:,}-token body ({TOKENIZER_NOTE}):"
    )
    for key in arms:
        arm = Arm.parse(key)
        try:
            compress_request(body, arm, settings=settings)  # warm-up (and model load)
        except ArmUnavailable as exc:
            print(f"  {key:<16} unavailable: {exc}")
            continue
        times: list[float] = []
        cpu: list[float] = []
        for _ in range(repeats):
            started = time.process_time()
            result = compress_request(body, arm, settings=settings)
            cpu.append((time.process_time() - started) * 1000.0)
            times.append(result.elapsed_ms)
        print(
            f"  {key:<16} p50 {statistics.median(times):6.2f} ms   p99 {_p(times, 0.99):6.2f} ms"
            f"   CPU p50 {statistics.median(cpu):6.2f} ms   "
            f"reduction {result.reduction * 100:5.1f}%"
        )
    counting: list[float] = []
    counting_cpu: list[float] = []
    for _ in range(repeats):
        result = compress_request(body, Arm("safe"), settings=settings)
        wall, cpu_start = time.perf_counter(), time.process_time()
        _ = result.original_tokens, result.compressed_tokens
        counting.append((time.perf_counter() - wall) * 1000.0)
        counting_cpu.append((time.process_time() - cpu_start) * 1000.0)
    print(
        f"  reading both token counts of a result: p50 {statistics.median(counting):.2f} ms"
        f"   CPU p50 {statistics.median(counting_cpu):.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--llmlingua-model", default=DEFAULT_LLMLINGUA_MODEL)
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} cores\n")
    throughput(max(1, args.repeats // 10))
    latency(args.repeats, args.llmlingua_model)


if __name__ == "__main__":
    main()

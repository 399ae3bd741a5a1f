"""Throughput of each model-free rung and latency of `compress_request` at the sizes users send.

Prints figures; asserts nothing (timing goals live here, never in tests). Wall time is
what a caller waits; CPU time (this process's) is printed beside it because on a shared
machine wall time mostly measures the neighbours: with the load average above the core
count, a 3 ms computation often waits 10 ms for its turn.

Goals (issue 15, issue 27): `safe` >= 20 MB/s and `prune@0.5` >= 10 MB/s;
`compress_request` p50 <= 1 ms with `safe` at 2k tokens; `prune@0.5` p99 <= 5 ms at 2k
tokens and <= 50 ms at 100k; cost linear in the request's size (growth exponent ~1: the
slope of log time over log tokens between the smallest and the largest size).

`compress_request` counts no tokens; the last line shows what reading the counts costs.

The process first does what the proxy's does before it serves
(`tokenlens.proxy.apply.settle_process`: warm up the codec, then `gc.freeze()` the heap),
so a full garbage collection costs what it costs in the proxy (~0.5 ms at 100k tokens)
and not what it costs in a process that never froze its start-up heap (12-54 ms by what
it imported, in about one large call of ten); `--no-freeze` measures the latter.

    .venv/bin/python bench/bench_ladder.py [--repeats N] [--sizes 2000,20000,100000]
        [--min-calls N] [--llmlingua-model PATH_OR_HUB_NAME] [--quick] [--no-freeze]
        [--man-page NAME]

A man-page row shows what the lossy rungs remove from indented plain text: `man bash`
rendered as a terminal shows it (needs `man` from man-db, `groff` from groff-base and
`col` from bsdextrautils, and the bash manual, which Debian installs with bash; the row
says so and is skipped when one is missing). `--man-page NAME` picks another page.

`--quick` runs every section on small inputs in a few seconds (the test suite runs it so
a moved file or a changed API breaks CI, not the next person who measures).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tokenlens.compress import Arm, CompressSettings, compress_request, compress_text
from tokenlens.compress.dedup import apply_dedup
from tokenlens.compress.minify import apply_minify
from tokenlens.compress.prune import apply_prune
from tokenlens.compress.safe import apply_safe
from tokenlens.compress.select import apply_select
from tokenlens.config import DEFAULT_LLMLINGUA_MODEL
from tokenlens.errors import ArmUnavailable
from tokenlens.proxy.apply import settle_process
from tokenlens.tokens import TOKENIZER_NOTE, estimate_tokens

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "compress" / "data" / "guide.md"
QUESTION = "How do I roll back a failed deployment, and who owns staging?"
SIZED_ARMS = ("safe", "prune@0.5", "select@0.5")


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


def distinct_corpus(target_bytes: int) -> str:
    """`corpus` with the words of its prose and list lines shuffled (seeded).

    `corpus` repeats most paragraphs once per copy, and prune counts a repeated paragraph's
    tokens once; here no prose paragraph repeats, so that gains nothing: the figure for a
    document without repeats.
    """
    rng = random.Random(27)
    lines = corpus(target_bytes).split("\n")
    for n, line in enumerate(lines):
        marker = "- " if line.startswith("- ") else ""
        if marker or line[:1].isalpha():
            words = line[len(marker) :].split(" ")
            rng.shuffle(words)
            lines[n] = marker + " ".join(words)
    return "\n".join(lines)


def body_of_tokens(tokens: int, source: Callable[[int], str] = corpus) -> dict[str, object]:
    """A Messages body whose context is the first paragraphs of `source`, ~`tokens` long."""
    paragraphs = source(8 * tokens).split("\n\n")
    kept: list[str] = []
    count = 0
    while count < tokens:
        paragraph = paragraphs[len(kept)]
        kept.append(paragraph)
        count += estimate_tokens(paragraph + "\n\n")
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


def throughput(repeats: int, megabytes: float) -> None:
    text = corpus(int(megabytes * 1e6))
    size = len(text.encode()) / 1e6
    rungs = {
        "safe": apply_safe,
        "minify": apply_minify,
        "dedup": apply_dedup,
        "prune@0.5": lambda t: apply_prune(t, 0.5, QUESTION),
        "select@0.5": lambda t: apply_select(t, 0.5, QUESTION),
    }
    print(f"Throughput on {size:.2f} MB of markdown (best of {repeats}, wall and CPU):")
    for name, rung in rungs.items():
        runs = [_timed(rung, text) for _ in range(repeats)]
        _print_rate(name, size, runs)
    distinct = distinct_corpus(int(megabytes * 1e6))
    runs = [_timed(rungs["prune@0.5"], distinct) for _ in range(repeats)]
    _print_rate("prune@0.5", len(distinct.encode()) / 1e6, runs, "  (no paragraph repeats)")


def _print_rate(name: str, size: float, runs: list[tuple[float, float]], note: str = "") -> None:
    wall = min(w for w, _ in runs)
    cpu = max(min(c for _, c in runs), 1e-9)
    print(
        f"  {name:<12} {size / wall:8.2f} MB/s  ({wall * 1000:5.0f} ms)   "
        f"CPU {size / cpu:8.2f} MB/s  ({cpu * 1000:5.0f} ms){note}"
    )


def _timed(fn: Callable[[str], str], text: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(text)
    return time.perf_counter() - wall, time.process_time() - cpu


MAN_EXCERPT = SAMPLE.parent / "man-curl-excerpt.txt"  # curl(1): see its .LICENSE file
MAN_NEEDS = "man (man-db), groff (groff-base) and col (bsdextrautils)"


def man_page_text(name: str) -> str | None:
    """`man NAME` as an 80-column terminal shows it, overstrikes removed; None if missing."""
    if not all(shutil.which(tool) for tool in ("man", "groff", "col")):
        return None
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    page = subprocess.run(["man", "-P", "cat", name], capture_output=True, env=env)
    if page.returncode != 0 or not page.stdout:
        return None
    plain = subprocess.run(["col", "-bx"], input=page.stdout, capture_output=True, check=True)
    return plain.stdout.decode("utf-8", errors="replace")


def man_page(name: str, *, quick: bool) -> None:
    """Reduction of each arm on a man page: plain text indented by seven columns."""
    if quick:
        text, label = MAN_EXCERPT.read_text(encoding="utf-8"), f"{MAN_EXCERPT.name} (--quick)"
    else:
        found = man_page_text(name)
        if found is None:
            print(f"\nman {name}: skipped, needs {MAN_NEEDS} and the page installed")
            return
        text, label = found, f"man {name}"
    question = "Which option makes the program read commands from a string?"
    print(f"\nReduction on {label} ({len(text.encode()) / 1e3:,.0f} KB):")
    for key in ("safe", "minify", "dedup", "prune@0.8", "prune@0.5", "select@0.5"):
        started = time.process_time()
        result = compress_text(text, Arm.parse(key), question=question)
        cpu = (time.process_time() - started) * 1000.0
        removed = 1 - result.compressed_tokens / max(result.original_tokens, 1)
        print(
            f"  {key:<12} removes {removed * 100:5.1f}% of {result.original_tokens:,} tokens"
            f"   eligible blocks {result.eligible_blocks}/{result.total_blocks}"
            f"   CPU {cpu:6.0f} ms"
        )


def _p(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(repeats: int, model: str, *, with_lingua: bool) -> None:
    """Every arm on a ~2,000-token body (the proxy's common case)."""
    body = body_of_tokens(2_000)
    settings = CompressSettings(llmlingua_model=model)
    arms = ["control", "safe", "minify", "dedup", "prune@0.5", "select@0.5"]
    if with_lingua:
        arms.append("llmlingua2@0.5")
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
        times, cpu, result = _latencies(body, arm, settings, repeats)
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


def _latencies(
    body: dict[str, object], arm: Arm, settings: CompressSettings, repeats: int
) -> tuple[list[float], list[float], object]:
    """Wall (as `compress_request` reports it) and CPU milliseconds of `repeats` calls."""
    times: list[float] = []
    cpu: list[float] = []
    result = None
    for _ in range(repeats):
        started = time.process_time()
        result = compress_request(body, arm, settings=settings)
        cpu.append((time.process_time() - started) * 1000.0)
        times.append(result.elapsed_ms)
    return times, cpu, result


def by_size(sizes: list[int], repeats: int, min_calls: int = 20) -> None:
    """`compress_request` p50/p99 per size for the proxy's arms, and the growth exponent;
    then `prune@0.5` again on bodies cut from `distinct_corpus` (no paragraph repeats).

    Larger sizes get fewer calls, but at least `min_calls`: a p99 of 3 calls was their
    maximum, one neighbour's time slice away from any figure."""
    settings = CompressSettings()
    fewest = max(min_calls, repeats * sizes[0] // sizes[-1])
    print(
        f"\ncompress_request by request size (tokens; {repeats} calls per cell at "
        f"{sizes[0]:,}, {fewest} at {sizes[-1]:,}):"
    )
    header = "".join(f"{f'{size:,} tok':>22}" for size in sizes)
    print(f"  {'arm':<12}{header}   exponent (p50)   MB/s at {sizes[-1]:,}")
    rows = [(key, corpus, "") for key in SIZED_ARMS]
    rows.append(("prune@0.5", distinct_corpus, "  (no paragraph repeats)"))
    cpu_cells: list[str] = []
    for key, source, note in rows:
        bodies = {size: body_of_tokens(size, source) for size in sizes}
        arm = Arm.parse(key)
        cells: list[str] = []
        medians: list[float] = []
        for size in sizes:
            body = bodies[size]
            compress_request(body, arm, settings=settings)  # warm-up
            n = max(min_calls, repeats * sizes[0] // size)  # fewer calls at the large sizes
            times, cpu, _ = _latencies(body, arm, settings, n)
            medians.append(statistics.median(times))
            cells.append(f"{medians[-1]:8.2f} / {_p(times, 0.99):7.2f} ms")
        cpu_cells.append(f"{statistics.median(cpu):.2f} / {_p(cpu, 0.99):.2f} ms{note}")
        exponent = _exponent(sizes, medians)
        rate = _context_bytes(bodies[sizes[-1]]) / 1e6 / (medians[-1] / 1000.0)
        row = "".join(f"{c:>22}" for c in cells)
        print(f"  {key:<12}{row}   {exponent:14.2f}   {rate:10.1f}{note}")
    print("  (cells: p50 / p99; exponent: slope of log p50 over log tokens, 1.0 = linear)")
    print(
        f"  CPU time (this process) of the same calls at {sizes[-1]:,} tokens, p50 / p99 "
        "(wall minus CPU: waiting for a core):"
    )
    for (key, _, _), cell in zip(rows, cpu_cells, strict=True):
        print(f"    {key:<12}{cell}")
    _machine_tail(statistics.median(times), len(times))


def _machine_tail(target_ms: float, calls: int) -> None:
    """The tail this machine gives any work: a fixed pure-Python loop (no allocation, no
    garbage collection), sized to `target_ms`, run `calls` times like a cell above."""

    def spin(n: int) -> int:
        total = 0
        for i in range(n):
            total += i * i
        return total

    fastest = math.inf
    for _ in range(3):
        started = time.perf_counter()
        spin(200_000)
        fastest = min(fastest, time.perf_counter() - started)
    n = max(1, int(200_000 * target_ms / 1000.0 / max(fastest, 1e-9)))
    times: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        spin(n)
        times.append((time.perf_counter() - started) * 1000.0)
    print(
        f"  the machine's own tail: a fixed loop sized to the last cell's p50, {calls} runs: "
        f"p50 {statistics.median(times):.2f} / p99 {_p(times, 0.99):.2f} ms"
    )


def _context_bytes(body: dict[str, object]) -> int:
    """UTF-8 bytes of the body's context block (what the rungs read)."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return len(messages[0]["content"][0]["text"].encode())


def _exponent(sizes: list[int], times: list[float]) -> float:
    """Least-squares slope of log(time) over log(size)."""
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-6)) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return num / den if den else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--sizes", default="2000,20000,100000", help="request sizes, tokens")
    parser.add_argument("--llmlingua-model", default=DEFAULT_LLMLINGUA_MODEL)
    parser.add_argument("--man-page", default="bash", help="the man page of the man-page row")
    parser.add_argument("--quick", action="store_true", help="small inputs, a few seconds")
    parser.add_argument(
        "--min-calls", type=int, default=20, help="fewest calls per request-size cell"
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="skip the proxy's start-up gc.freeze (settle_process): every full collection "
        "scans the whole heap",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    repeats, megabytes = args.repeats, 1.0
    if args.quick:
        repeats, megabytes, sizes = 3, 0.05, [500, 2_000, 5_000]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} cores")
    if args.no_freeze:
        print("garbage collector: as is (--no-freeze; the proxy freezes its start-up heap)\n")
    else:
        settle_process(compressing=True)
        print(
            "garbage collector: start-up heap frozen after the warm-up, as in the proxy "
            "(tokenlens.proxy.apply.settle_process)\n"
        )
    throughput(max(1, repeats // 10), megabytes)
    latency(repeats, args.llmlingua_model, with_lingua=not args.quick)
    by_size(sizes, repeats, 3 if args.quick else args.min_calls)
    man_page(args.man_page, quick=args.quick)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nload average at the end {load}")


if __name__ == "__main__":
    main()

"""What a calibration set gives the ladder: per class, the share of tokens each model-free
arm removes (token-weighted over the class, `compress_request` as the proxy calls it) and
how far the contexts compress with zlib, for one or two task sets side by side.

A set whose contexts are padded from a small pool of sentences compresses far better than
real text, and so flatters every arm; the zlib column shows it beside real files of this
machine (a man page, a Debian changelog, a Python module), cut to 40,000 characters.

Prints figures; asserts nothing.

    .venv/bin/python bench/bench_task_set.py [--tasks DIR_OR_FILE ...] [--quick]

Default: the bundled starter set. `--quick` takes 3 tasks per class.
"""

from __future__ import annotations

import argparse
import gzip
import os
import zlib
from collections import defaultdict
from pathlib import Path

from tokenlens.compress import Arm, compress_request
from tokenlens.taskcheck import zlib_ratio
from tokenlens.tasks import DEFAULT_TASKS_PATH, KNOWN_CLASSES, CalibrationTask, load_tasks

ARMS = ("safe", "minify", "dedup", "prune@0.8", "prune@0.5", "prune@0.2", "select@0.5")
REAL_FILES = (
    "/usr/share/man/man1/bash.1.gz",
    "/usr/share/doc/libc6/changelog.Debian.gz",
    "/usr/lib/python3.11/argparse.py",
)


def reductions(tasks: list[CalibrationTask]) -> dict[str, dict[str, float]]:
    """class -> arm -> removed share of the class's request tokens."""
    before: dict[str, int] = defaultdict(int)
    after: dict[tuple[str, str], int] = defaultdict(int)
    for task in tasks:
        body = task.to_request(model="claude-haiku-4-5")
        for key in ARMS:
            result = compress_request(body, Arm.parse(key))
            after[task.task_class, key] += result.compressed_tokens
            if key == ARMS[0]:
                before[task.task_class] += result.original_tokens
    return {name: {key: 1 - after[name, key] / before[name] for key in ARMS} for name in before}


def real_ratio(path: str) -> float | None:
    file = Path(path)
    if not file.is_file():
        return None
    raw = file.read_bytes()
    text = (gzip.decompress(raw) if path.endswith(".gz") else raw).decode("utf-8", "replace")
    cut = text[:40_000].encode()
    return len(zlib.compress(cut, 9)) / len(cut)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", nargs="*", type=Path, default=[DEFAULT_TASKS_PATH])
    parser.add_argument("--quick", action="store_true", help="3 tasks per class")
    args = parser.parse_args()
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for path in args.tasks:
        tasks = load_tasks(path)
        if args.quick:
            kept: dict[str, list[CalibrationTask]] = defaultdict(list)
            for task in tasks:
                if len(kept[task.task_class]) < 3:
                    kept[task.task_class].append(task)
            tasks = [task for group in kept.values() for task in group]
        table = reductions(tasks)
        print(f"\n{path} ({len(tasks)} tasks): share of request tokens removed, and zlib ratio")
        print(f"  {'class':<22}" + "".join(f"{key:>11}" for key in ARMS) + "       zlib")
        for name in [c for c in KNOWN_CLASSES if c in table] + sorted(
            set(table) - set(KNOWN_CLASSES)
        ):
            ratio = zlib_ratio([t.context for t in tasks if t.task_class == name])
            cells = "".join(f"{table[name][key] * 100:10.1f}%" for key in ARMS)
            print(f"  {name:<22}{cells}   {ratio:8.2f}")
    print("\nzlib ratio of real text, first 40,000 characters:")
    for path in REAL_FILES:
        ratio = real_ratio(path)
        print(f"  {path:<48} " + ("absent" if ratio is None else f"{ratio:.2f}"))
    print(f"\nload average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

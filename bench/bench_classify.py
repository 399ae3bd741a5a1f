"""What the request classifier costs the proxy: per-request latency and start-up.

Per request: the proxy's own `classify` over the task file's bodies (built as the
calibration builds them), with the learned classifier fitted on that file and with the
hand-written rules alone, `--rounds` times (every round printed: a shared VM moves
sub-millisecond figures). Start-up: fresh interpreters importing the proxy app, then
loading a bundle (which imports numpy and builds the weight table), and, for comparison,
importing scikit-learn, which the proxy never does.

Goal: <= ~0.2 ms per request at p50. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_classify.py [--tasks FILE] [--rounds 3] [--samples 5000] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from tokenlens.classifier.evaluate import latency_ms
from tokenlens.classifier.fit import fit_bundle, task_bodies
from tokenlens.tasks import load_tasks

_STARTUP = """
import time
t0 = time.perf_counter()
import tokenlens.proxy.app
t1 = time.perf_counter()
from tokenlens.classifier.bundle import load_bundle
bundle = load_bundle({path!r})
t2 = time.perf_counter()
import sklearn.linear_model
t3 = time.perf_counter()
print(f"{{1e3 * (t1 - t0):.0f}} {{1e3 * (t2 - t1):.0f}} {{1e3 * (t3 - t2):.0f}}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=5_000)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.samples = 1, 200
    tasks = load_tasks(args.tasks)
    bodies = task_bodies(tasks)
    bundle = fit_bundle(tasks)
    known = list(bundle.classes)
    print(f"{len(tasks)} tasks; bundle: {len(bundle.slots)} weighted features")
    columns = ("model p50", "model p99", "rules p50", "rules p99")
    print(f"{'round':>5} " + " ".join(f"{c:>10}" for c in columns) + "  (ms)")
    for number in range(1, args.rounds + 1):
        m50, m99, _ = latency_ms(bodies, bundle, known, samples=args.samples)
        r50, r99, _ = latency_ms(bodies, None, known, samples=args.samples)
        print(f"{number:>5} {m50:>10.3f} {m99:>10.3f} {r50:>10.3f} {r99:>10.3f}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bundle.json"
        path.write_text(bundle.model_dump_json(), encoding="utf-8")
        print(f"bundle file: {path.stat().st_size / 1024:.0f} KiB of JSON")
        print("start-up (ms): import proxy app | load bundle (numpy + table) | sklearn (unused)")
        for _ in range(args.rounds):
            code = _STARTUP.format(path=str(path))
            result = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            print("  " + " | ".join(result.stdout.split()))


if __name__ == "__main__":
    main()

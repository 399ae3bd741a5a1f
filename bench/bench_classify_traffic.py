"""The request classifier on harvested traffic: requests it never saw, captured by the proxy.

Traffic: instances of every synthetic template family (`scripts/taskgen`; since the
starter set is real text, none of these templates is in it), sent as an application
would, through a real `tokenlens serve --capture` (no policy, 100 % sampling) to the
loopback Anthropic server, each with its true class in `x-tokenlens-class`, as an
application that knows its classes sends it. Then
`tokenlens tasks harvest` turns the captures into tasks (questions and contexts cut the
way the ladder sees them, not the way the generator wrote them), and the classifier fitted
on the training part of the starter set (outside `tasks_data/classifier-heldout.txt`)
labels them. Printed: the whole harvested set, then the part from families the fit never
saw (new request templates: all of it, with the real-text starter set) and any part from
families it was fitted on.

Prints figures; asserts nothing (the held-out split's figures are a test).

    .venv/bin/python bench/bench_classify_traffic.py [--per-family 3] [--quick]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from bench_proxy import start_proxy, start_upstream

from tokenlens.classifier.evaluate import count, split_holdout
from tokenlens.classifier.fit import fit_bundle, task_bodies, task_family
from tokenlens.cli import main as cli_main
from tokenlens.tasks import DEFAULT_TASKS_PATH, load_tasks

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "tasks_data" / "classifier-heldout.txt"
FIRST_NUMBER = 201  # the starter set uses 1-8


def generator_modules() -> list[ModuleType]:
    sys.path.insert(0, str(ROOT / "scripts" / "taskgen"))
    import chat_history
    import code_context
    import extraction
    import instruction_following
    import long_doc_qa
    import numeric_reasoning
    import summarization

    return [
        extraction,
        code_context,
        numeric_reasoning,
        instruction_following,
        long_doc_qa,
        summarization,
        chat_history,
    ]


def traffic(per_family: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(family, true class, request body) of new instances of every generated family."""
    out = []
    for module in generator_modules():
        for name, maker in vars(module).items():
            if not (name.startswith("_") and inspect.isfunction(maker)):
                continue
            if list(inspect.signature(maker).parameters) != ["n"]:
                continue
            for n in range(FIRST_NUMBER, FIRST_NUMBER + per_family):
                task = maker(n)
                row = task.row()
                body: dict[str, Any] = {
                    "model": "claude-haiku-4-5",
                    "max_tokens": 256,
                    "messages": [
                        *row.get("history", []),
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": row["context"]},
                                {"type": "text", "text": row["question"]},
                            ],
                        },
                    ],
                }
                if row.get("system"):
                    body["system"] = row["system"]
                out.append((task_family(row["id"]), row["task_class"], body))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-family", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a few seconds (the test suite)")
    args = parser.parse_args()
    if args.quick:
        args.per_family = 1
    requests = traffic(args.per_family)
    print(f"traffic: {len(requests)} requests from {len({f for f, _, _ in requests})} families")
    starter = load_tasks(DEFAULT_TASKS_PATH)
    train, _ = split_holdout(starter, HELDOUT)
    fitted_families = {task_family(t.id) for t in train}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        upstream, upstream_url = start_upstream("fake", 0.0)
        captures = root / "captures"
        proxy, url, _ = start_proxy(
            upstream_url, ["--capture", str(captures), "--capture-sample", "1"]
        )
        try:
            with httpx.Client(timeout=120) as client:
                for _, true_class, body in requests:
                    reply = client.post(
                        f"{url}/v1/messages",
                        json=body,
                        headers={
                            "x-api-key": "sk-ant-test-dummy",
                            "anthropic-version": "2023-06-01",
                            "x-tokenlens-class": true_class,
                        },
                    )
                    reply.raise_for_status()
        finally:
            proxy.terminate()  # lifespan shutdown drains the capture writer
            proxy.wait(timeout=60)
            upstream.terminate()
            upstream.wait(timeout=30)
        harvested = root / "harvested.jsonl"
        assert cli_main(["tasks", "harvest", str(captures), "--out", str(harvested)]) == 0
        tasks = load_tasks(harvested)
        bundle = fit_bundle(train)
        model = root / "bundle.json"
        model.write_text(bundle.model_dump_json(), encoding="utf-8")
        print(f"classifier fitted on {len(train)} training tasks, threshold {bundle.threshold:.3f}")
        cli_main(["classify", "--eval", str(harvested), "--model", str(model)])
        # which family each harvested task came from: match by question and context
        family_of = {
            (
                body["messages"][-1]["content"][1]["text"],
                body["messages"][-1]["content"][0]["text"],
            ): f
            for f, _, body in requests
        }
        parts: dict[str, list[tuple[str, str | None]]] = {
            "families the fit never saw": [],
            "fitted families": [],
        }
        for task, body in zip(tasks, task_bodies(tasks), strict=True):
            family = family_of.get((task.question, task.context))
            key = "fitted families" if family in fitted_families else "families the fit never saw"
            parts[key].append((task.task_class, bundle.predict(body).label))
        for key, pairs in parts.items():
            if not pairs:
                continue
            right, unsure, wrong = count([t for t, _ in pairs], [p for _, p in pairs])
            n = len(pairs)
            print(
                f"{key:<26} {n:>4} tasks: right {right} ({right / n:.1%}), unsure {unsure} "
                f"({unsure / n:.1%}), wrong {wrong} ({wrong / n:.1%})"
            )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

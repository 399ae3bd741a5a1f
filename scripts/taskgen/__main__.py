"""Write synthetic template tasks: <out>/gen-<class>.jsonl.

    .venv/bin/python scripts/taskgen --out DIR            # write the files
    .venv/bin/python scripts/taskgen --out DIR --check    # exit 1 if a file differs

These template families are no longer part of the starter set (their contexts are padded
from small pools of filler sentences, which flatters compression; the starter set is built
from real text by scripts/realtext). bench/bench_classify_traffic.py still draws synthetic
traffic from them: new request templates the classifier never saw.

Deterministic: every draw is seeded by the task's family and number, so the same code
writes the same bytes. The code-context repository tasks read source files of packages
pinned in constraints.txt (their licences are named in each task's tags); a different
version of one of them changes those tasks, which `--check` reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import chat_history
import code_context
import extraction
import instruction_following
import long_doc_qa
import numeric_reasoning
import summarization

MODULES = {
    "extraction": extraction,
    "code-context": code_context,
    "numeric-reasoning": numeric_reasoning,
    "instruction-following": instruction_following,
    "long-doc-qa": long_doc_qa,
    "summarization": summarization,
    "chat-history": chat_history,
}
LIMIT = 5_000_000  # the house rule: no committed file over 5 MB


def render(name: str) -> str:
    rows = [task.row() for task in MODULES[name].tasks()]
    for row in rows:
        assert row["task_class"] == name, row["id"]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    parser.add_argument("--out", type=Path, required=True, help="folder to write to")
    parser.add_argument("classes", nargs="*", default=list(MODULES))
    args = parser.parse_args()
    stale = []
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
    for name in args.classes:
        text = render(name)
        path = args.out / f"gen-{name}.jsonl"
        size = len(text.encode("utf-8"))
        if size > LIMIT:
            raise SystemExit(f"{path.name}: {size:,} bytes, over the 5 MB limit: split it")
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({text.count(chr(10))} tasks, {size:,} bytes)")
    if stale:
        print("differs from the generator: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

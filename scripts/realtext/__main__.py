"""Write the real-text part of the starter set: tasks_data/starter/real-<class>.jsonl.

    .venv/bin/python scripts/realtext            # (re)write the files
    .venv/bin/python scripts/realtext --check    # exit 1 if a committed file differs

Each context is a file (or a run of whole entries of one) that a Debian package installed
on this machine: man pages rendered by `man` at 80 columns, Debian changelogs, modules of
the Python 3.11 standard library. Each task's `source` names the package, its version, the
file and its licence. Questions and references come from the text's own structure (a
changelog's versions, dates and closed bugs; a man page's option list; a module's syntax
tree), so every reference is stated by the context. Needs: man-db, groff-base, bsdextrautils
(`col`) and python3.11; a different version of a package changes its tasks, which
`--check` reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from build import BUILDERS, Pools
from sources import Overlap

from tokenlens.tasks import load_tasks

OUT = Path(__file__).resolve().parents[2] / "tasks_data" / "starter"
LIMIT = 5_000_000  # the house rule: no committed file over 5 MB


def render() -> dict[str, str]:
    overlap = Overlap()
    for written in load_tasks(OUT / "00-written.jsonl"):
        overlap.admit(written.context)
    pools = Pools(overlap)
    out: dict[str, str] = {}
    for name, build in BUILDERS.items():
        rows = build(pools)
        out[name] = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return out


DOC = OUT.parents[1] / "docs" / "calibration-sources.md"


def sources_doc(rows: list[dict[str, object]]) -> str:
    """The page that says where each real-text context came from, and under which licence."""
    lines = [
        "# Where the starter set's real text comes from",
        "",
        "Every context of the `real-*.jsonl` files of `tasks_data/starter/` is cut from a file",
        "a Debian 12 package installs, named here with the package's version and the licence",
        "its `/usr/share/doc/<package>/copyright` file gives (the `Files: *` stanza). Man pages",
        "are as `man` prints them at 80 columns; changelogs are runs of whole entries; Python",
        "modules are whole files or one function of one. The same record is in each task's",
        "`source` field. The written tasks (`00-written.jsonl`) were written for this project.",
        "",
        "| task | package | version | file | licence |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        for src in row["source"]:  # type: ignore[attr-defined]
            lines.append(
                f"| `{row['id']}` | {src['package']} | {src['version']} | `{src['path']}` "
                f"| {src['licence']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args()
    stale = []
    rendered = render()
    rows = [json.loads(line) for text in rendered.values() for line in text.splitlines()]
    doc = sources_doc(rows)
    if args.check:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != doc:
            stale.append(DOC.name)
    else:
        DOC.write_text(doc, encoding="utf-8")
    for name, text in rendered.items():
        path = OUT / f"real-{name}.jsonl"
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

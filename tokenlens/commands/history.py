"""`tokenlens history` and `tokenlens compare`: how calibrations moved from run to run."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tokenlens.config import DEFAULT_REPORTS
from tokenlens.formatting import plural


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = sub.add_parser(
        "history",
        help="per class: verdict, arm, reduction, retention and noise floor over the last runs",
        description="Flags a significant change (⚠) where an interval no longer overlaps "
        "the previous run's: the tracked arm's retention, or the noise floor.",
    )
    history.add_argument("--class", dest="task_class", default=None, help="one task class")
    history.add_argument("--last", type=int, default=10, help="runs to show (default 10)")
    _paths(history)
    history.set_defaults(func=run_history)

    compare = sub.add_parser(
        "compare",
        help="what changed between two runs (run ids, or calibration ids for their newest "
        "finished run)",
    )
    compare.add_argument("run_a")
    compare.add_argument("run_b")
    _paths(compare)
    compare.set_defaults(func=run_compare)


def _paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reports", default=DEFAULT_REPORTS, help="policy and report root (folder or URL)"
    )
    parser.add_argument(
        "--store", default=None, help="store root, folder or URL (default <reports>/store)"
    )


def _store(args: argparse.Namespace) -> str:
    from tokenlens.storage import join

    return str(args.store) if args.store else join(args.reports, "store")


def columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows as aligned plain-text columns (the last column left ragged)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    out = []
    for row in [list(header), *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        out.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(out)


def run_history(args: argparse.Namespace) -> int:
    from tokenlens.calibration.history import (
        HISTORY_HEADER,
        history_cells,
        history_rows,
        load_history,
    )
    from tokenlens.calibration.run_settings import mixed_settings

    store = _store(args)
    states = load_history(store, args.reports, last=args.last)
    if not states:
        print(f"no finished run in {store}/runs")
        return 0
    rows = history_rows(states, args.task_class)
    mixed = mixed_settings(states)
    if mixed:
        print("These runs were not all measured the same way (see the change column):")
        for line in mixed:
            print(f"  {line}")
        print()
    print(columns(HISTORY_HEADER, history_cells(rows)))
    changed = [row for row in rows if row.flags]
    print()
    print(
        f"{plural(len(states), 'run')}; {plural(len(changed), 'significant change')}"
        if changed
        else f"{plural(len(states), 'run')}; no significant change"
    )
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from tokenlens.calibration.history import compare_lines, find_state

    store = _store(args)
    a, note_a = find_state(store, args.reports, args.run_a)
    b, note_b = find_state(store, args.reports, args.run_b)
    for note in (note_a, note_b):
        if note is not None:
            print(note)
    for line in compare_lines(a, b):
        print(line)
    return 0

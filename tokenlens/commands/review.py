"""`tokenlens review [RUN]`: grade a blind sample of a calibration's pairs; `--summary` prints
how far the judge agrees with the people who did, and writes nothing; `--publish` writes
what the review found into the run's report and policies (`latest.json` among them, which
every proxy reloads), so changing a live policy is always an explicit command."""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenlens.config import REPORTS_DIR


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "review",
        help="check the judge against people: a blind review page and agreement figures",
    )
    parser.add_argument(
        "run",
        nargs="?",
        default=None,
        help="calibration id (default: the one behind <reports>/policy/latest.json)",
    )
    parser.add_argument("--reports", type=Path, default=REPORTS_DIR, help="policy root")
    parser.add_argument(
        "--store", type=Path, default=None, help="store root (default <reports>/store)"
    )
    parser.add_argument(
        "--tasks",
        type=Path,
        default=None,
        help="the task file the run used, for the references (default: the bundled set)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=None,
        help="cases to review, drawn once per run (default 40)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample draw")
    parser.add_argument("--reviewer", default=None, help="open the page as this reviewer")
    parser.add_argument("--port", type=int, default=8790, help="port on 127.0.0.1")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="for the loss decision (default: the run's policy, else 0.95)",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the agreement figures and exit (writes nothing)",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="print the figures, then write the review into the run's report and its "
        "policies: agreement notes, people's retention, arms people withdrew "
        "(latest.json too when it is this run's; proxies reload it)",
    )
    parser.add_argument(
        "--artifact",
        action="store_true",
        help="print the summary and publish it as Prefect artifacts (review-agreement)",
    )
    parser.set_defaults(func=run_review)


def run_review(args: argparse.Namespace) -> int:
    from tokenlens.review.session import (
        DEFAULT_TOLERANCE,
        load_figures,
        open_review,
        resolve_run,
    )

    store = args.store or args.reports / "store"
    run_id, run_tolerance = resolve_run(args.run, args.reports)
    if args.summary or args.artifact or args.publish:
        from tokenlens.review.summary import summary_lines

        tolerance = args.tolerance or run_tolerance or DEFAULT_TOLERANCE
        figures = load_figures(store, run_id, tolerance=tolerance)
        for line in summary_lines(figures):
            print(line)
        changes = flag_policy(args.reports, run_id, figures, write=args.publish)
        for path, poor, withdrawn in changes:
            what = "poor agreement" if poor else "people's grades"
            print(
                f"{what} noted in the reasons of {path}"
                if args.publish
                else f"--publish would note {what} in the reasons of {path}"
            )
            for name in withdrawn:
                print(f"  {name}: arm withdrawn, people's grades put it below the tolerance")
        run_folder = args.reports / "runs" / run_id
        if args.publish and run_folder.is_dir():
            from tokenlens.review.summary import write_review_page

            print(f"review section of the report: {write_review_page(run_folder, figures)}")
        elif not args.publish:
            print(
                "nothing was written: `tokenlens review --publish` writes the review into "
                "the run's report and policies"
            )
        if args.artifact:
            from flows.review import KEY_AGREEMENT, review_summary

            review_summary(str(store), run_id, tolerance)
            print(f"published as Prefect artifacts {KEY_AGREEMENT} and {KEY_AGREEMENT}-classes")
        return 0
    review = open_review(store, run_id, tasks=args.tasks, size=args.sample, seed=args.seed)
    serve(review, port=args.port, reviewer=args.reviewer)
    return 0


def flag_policy(
    reports: Path, run_id: str, figures: object, *, write: bool = True
) -> list[tuple[Path, bool, list[str]]]:
    """What the review found, for the run's policies: classes where people and the judge
    disagree (in the reason) and each arm's retention corrected by people's grades.

    The policy is what a user reads before applying an arm, so that is where it must say
    the judge was not confirmed by people; re-running is idempotent. Returns the files
    that change (written only with `write`), each with whether it gets a poor-agreement
    note and the classes whose arm people's grades withdraw."""
    from tokenlens.policy import atomic_write_text, load_policy
    from tokenlens.review.figures import (
        ReviewFigures,
        poor_agreement,
        with_people_corrections,
        with_review_flags,
    )

    assert isinstance(figures, ReviewFigures)
    flags = poor_agreement(figures)
    written: list[tuple[Path, bool, list[str]]] = []
    candidates = [
        *sorted((reports / "policy").glob("*.json")),
        reports / "runs" / run_id / "policy.json",
    ]
    for path in candidates:
        if not path.exists():
            continue
        policy = load_policy(path)
        if (policy.run_id or policy.calibration_id) != run_id:
            continue
        fresh = {
            name: note
            for name, note in flags.items()
            if name in policy.classes and "Review: " not in policy.classes[name].reason
        }
        updated = with_people_corrections(with_review_flags(policy, fresh), figures)
        if updated != policy:
            if write:
                atomic_write_text(path, updated.model_dump_json(indent=2) + "\n")
            withdrawn = [
                name
                for name, entry in updated.classes.items()
                if entry.arm is None and policy.classes[name].arm is not None
            ]
            written.append((path, bool(fresh), withdrawn))
    return written


def serve(review: object, *, port: int, reviewer: str | None) -> None:
    """Serve the page on loopback until interrupted."""
    from urllib.parse import quote

    import uvicorn

    from tokenlens.review.app import Review, create_app
    from tokenlens.review.store import check_reviewer

    assert isinstance(review, Review)
    path = f"/r/{quote(check_reviewer(reviewer))}/" if reviewer else "/"
    cases = len(review.sample.cases)
    print(f"review of {review.sample.run_id}: {cases} cases; grades go to {review.store.root}")
    print(f"open http://127.0.0.1:{port}{path}  (Ctrl-C to stop; grades are saved as given)")
    uvicorn.run(create_app(review), host="127.0.0.1", port=port, log_level="warning")

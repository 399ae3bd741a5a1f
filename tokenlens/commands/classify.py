"""`tokenlens classify`: fit the request classifier, or measure one on a task file.

`--fit FILE --out PATH` writes a classifier bundle (JSON data, no pickle). `--eval FILE`
prints the confusion matrix, right / unsure / wrong and per-request latency. Figures on
tasks a classifier was fitted on are never in-sample: they come from k-fold refits by task.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tokenlens.tasks import KNOWN_CLASSES

if TYPE_CHECKING:
    from tokenlens.classifier.evaluate import Evaluation
    from tokenlens.tasks import CalibrationTask


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "classify",
        help="fit the proxy's request classifier or evaluate it on a task file",
        description=(
            "Evaluate (--eval) or fit (--fit) the classifier that routes proxy requests to "
            "task classes. Wrong labels are what matter: below its confidence threshold "
            "the classifier says unsure and the policy's default entry applies."
        ),
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--eval", type=Path, metavar="FILE", help="task file to evaluate on")
    action.add_argument("--fit", type=Path, metavar="FILE", help="task file to fit on")
    parser.add_argument("--out", type=Path, metavar="PATH", help="where --fit writes the bundle")
    parser.add_argument(
        "--model",
        type=Path,
        metavar="PATH",
        help="bundle (or policy file carrying one) to evaluate; default: fit on --eval FILE "
        "and report cross-validated figures",
    )
    parser.add_argument(
        "--rules", action="store_true", help="evaluate the hand-written rules instead"
    )
    parser.add_argument(
        "--holdout",
        type=Path,
        metavar="IDS",
        help="with --eval: fit on the tasks NOT listed in this file (one id per line) and "
        "score the ones it lists, e.g. tasks_data/classifier-heldout.txt for the starter set",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=None,
        help="k for k-fold by task (default 5; k ≥ number of tasks: leave-one-out). With "
        "--eval: the evaluation's folds; with --fit: the folds the threshold is chosen on",
    )
    parser.add_argument(
        "--max-wrong",
        type=float,
        default=None,
        help="wrong-label rate the threshold aims for on held-out folds (default 0.03, "
        "fit.DEFAULT_MAX_WRONG: below the 5 %% goal, see docs/classifier.md)",
    )
    parser.set_defaults(func=run)


def _folds_text(folds: int, n: int) -> str:
    return "leave-one-out" if folds >= n else f"{folds}-fold by task family"


def run(args: argparse.Namespace) -> int:
    from tokenlens.tasks import load_tasks

    if args.fit is not None and args.out is None:
        raise SystemExit("tokenlens classify: --fit needs --out PATH")
    if args.fit is not None and (args.model is not None or args.rules or args.holdout):
        raise SystemExit(
            "tokenlens classify: --model, --rules and --holdout go with --eval, not --fit"
        )
    if args.holdout is not None and (args.model is not None or args.rules):
        raise SystemExit("tokenlens classify: --holdout fits its own model: drop --model/--rules")
    if args.max_wrong is not None and not 0.0 <= args.max_wrong < 1.0:
        raise SystemExit(f"tokenlens classify: --max-wrong {args.max_wrong} is not in [0, 1)")
    if args.folds is not None and args.folds < 2:
        raise SystemExit(f"tokenlens classify: --folds {args.folds}: need at least 2")
    path: Path = args.fit if args.fit is not None else args.eval
    tasks = load_tasks(path)
    names = {t.task_class for t in tasks}
    classes = [c for c in KNOWN_CLASSES if c in names] + sorted(names - set(KNOWN_CLASSES))
    print(f"{path}: {len(tasks)} tasks, {len(classes)} classes")
    options: dict[str, float] = {}
    if args.max_wrong is not None:
        options["max_wrong"] = args.max_wrong
    if args.fit is not None:
        return _fit(tasks, args.out, args.folds, options)
    if args.holdout is not None:
        evaluation = _evaluate_holdout(tasks, args.holdout, args.folds, options)
    else:
        evaluation = _evaluate(tasks, args.model, args.rules, args.folds, options)
    from tokenlens.classifier.evaluate import render

    print(f"how: {evaluation.how}")
    print(render(evaluation, classes))
    return 0


def _fit(
    tasks: list[CalibrationTask], out: Path, folds: int | None, options: dict[str, float]
) -> int:
    from tokenlens.classifier import fit as fitting
    from tokenlens.policy import atomic_write_text

    bundle = fitting.fit_bundle(tasks, folds=folds or fitting.DEFAULT_FOLDS, **options)
    atomic_write_text(out, bundle.model_dump_json() + "\n")
    fit = bundle.fit
    print(
        f"wrote {out}: {len(bundle.classes)} classes, {len(bundle.slots)} weighted "
        f"features, threshold {bundle.threshold:.3f}"
    )
    print(
        f"threshold chosen on {_folds_text(fit.folds, fit.n_tasks)} held-out predictions: "
        f"right {fit.cv_right}, unsure {fit.cv_unsure}, wrong {fit.cv_wrong} "
        "(for figures on unseen data run --eval on this file: it refits per fold)"
    )
    return 0


def _evaluate_holdout(
    tasks: list[CalibrationTask], ids: Path, folds: int | None, options: dict[str, float]
) -> Evaluation:
    """Fit (threshold included) on the tasks outside the id list; score the listed ones."""
    from tokenlens.classifier import fit as fitting
    from tokenlens.classifier.evaluate import evaluate, latency_ms, split_holdout

    train, held = split_holdout(tasks, ids)
    bundle = fitting.fit_bundle(train, folds=folds or fitting.DEFAULT_FOLDS, **options)
    bodies = fitting.task_bodies(held)
    labels = [bundle.predict(body).label for body in bodies]
    known = sorted(set(KNOWN_CLASSES) | {t.task_class for t in tasks})
    how = (
        f"fitted on the {len(train)} tasks outside {ids} (threshold {bundle.threshold:.3f}), "
        f"scored on the {len(held)} it lists"
    )
    true = [t.task_class for t in held]
    return evaluate(how, true, labels, latency_ms(bodies, bundle, known))


def _evaluate(
    tasks: list[CalibrationTask],
    model: Path | None,
    rules: bool,
    folds: int | None,
    options: dict[str, float],
) -> Evaluation:
    """Labels from the rules, from a bundle on unseen tasks, or cross-validated refits."""
    from tokenlens.classifier import fit as fitting
    from tokenlens.classifier.bundle import load_bundle, task_digest
    from tokenlens.classifier.evaluate import evaluate, latency_ms
    from tokenlens.classifier.rules import rule_class

    true = [t.task_class for t in tasks]
    bodies = fitting.task_bodies(tasks)
    known = sorted(set(KNOWN_CLASSES) | set(true))
    if rules:
        how = "hand-written rules (tuned by hand on the starter set: in-sample there)"
        labels = [rule_class(body) for body in bodies]
        return evaluate(how, true, labels, latency_ms(bodies, None, known))

    bundle = load_bundle(model) if model is not None else None
    seen = set(bundle.fit.task_digests) if bundle is not None else set()
    unseen = [i for i, body in enumerate(bodies) if task_digest(body) not in seen]
    if bundle is not None and unseen:
        if len(unseen) < len(tasks):
            left_out = len(tasks) - len(unseen)
            print(
                f"note: {left_out} of {len(tasks)} tasks are in the model's training set: left out"
            )
        kept = [bodies[i] for i in unseen]
        how = f"classifier {model} on {len(unseen)} tasks it was not fitted on"
        labels = [bundle.predict(body).label for body in kept]
        return evaluate(how, [true[i] for i in unseen], labels, latency_ms(kept, bundle, known))

    # Fitted on this very file (or about to be): cross-validate, refitting per fold.
    k = min(folds or fitting.DEFAULT_FOLDS, len(tasks))
    inner = bundle.fit.folds if bundle is not None else fitting.DEFAULT_FOLDS
    if bundle is not None:
        options = {"c": bundle.fit.c, "max_wrong": bundle.fit.max_wrong, **options}
    labels = fitting.cross_validated_labels(tasks, folds=k, inner_folds=inner, **options)
    shipped = bundle or fitting.fit_bundle(tasks, folds=inner, **options)
    how = (
        f"cross-validated ({_folds_text(k, len(tasks))}): the classifier is fitted on this "
        "file, so each task is labelled by a model and threshold fitted without it"
    )
    return evaluate(how, true, labels, latency_ms(bodies, shipped, known))

"""What a `calibrate` flow run shows in the Prefect UI: its artifacts and its parameters.

- `calibration-run` (first): the settings the run ran with, which a resume takes from the
  run it resumes, not from the flow run's parameters; the flow run's parameters are
  rewritten to them too (`record_effective_parameters`), so what ran is what is recorded.
- `calibration-progress`: one progress artifact per flow run; a retry of the flow run
  updates the one its first attempt created (a new one would leave the old at 70 %).
- `calibration-curve`, `-policy`, `-report`, `-trend`: the results.
- `calibration-spend`: the plan, and what the run paid over all its attempts and shards,
  read from the ledger (every paid call is stamped with its run), not only this attempt.

Prefect is imported here (the flow's module only wires); the texts are plain functions in
`tokenlens.calibration.summary`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar, cast
from uuid import UUID

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from tokenlens.calibration.stage_compress import unavailable_arms
from tokenlens.calibration.summary import (
    RunSpend,
    curve_records,
    report_artifact,
    spend_text,
    table_cell,
    trend_markdown,
    where_markdown,
)
from tokenlens.report import policy_markdown

if TYPE_CHECKING:
    from tokenlens.calibration.context import Calibration
    from tokenlens.calibration.params import CalibrateParams
    from tokenlens.calibration.stage_publish import Published
    from tokenlens.decision import Curve
    from tokenlens.tables import CompressionRow

#: Stable artifact keys (lowercase letters, digits, dashes).
KEY_RUN = "calibration-run"
KEY_PROGRESS = "calibration-progress"
KEY_CURVE = "calibration-curve"
KEY_POLICY = "calibration-policy"
KEY_SPEND = "calibration-spend"
KEY_REPORT = "calibration-report"
KEY_TREND = "calibration-trend"
KEY_ROUNDS = "calibration-rounds"


def flow_run_id() -> str | None:
    """The Prefect flow run's id: a retry of the same flow run resumes the same run."""
    from prefect.runtime import flow_run

    value = flow_run.get_id()
    return str(value) if value else None


class ArtifactProgress:
    """The flow run's progress artifact, updated at most every half second.

    A retried flow run (same id, a new attempt) updates the artifact its first attempt
    created instead of adding a second one beside it. Thread-safe: the compress and pay
    stages run side by side, and both may be first to report."""

    #: Share of the whole per stage; sample and judge run as one stream (`stage_pay`).
    WEIGHTS: ClassVar[dict[str, float]] = {"compress": 0.1, "sample": 0.6, "judge": 0.3}

    def __init__(self) -> None:
        self._id: UUID | None = None
        self._last = 0.0
        self._done: dict[str, float] = {}
        self._sent: float | None = None
        self._lock = threading.RLock()

    def _percent(self, stage: str, done: int, total: int) -> float:
        """The whole run's share done: a stage's own share, and every stage before it
        that reported nothing in this attempt (nothing left to do) counted as done."""
        self._done[stage] = done / total if total else 1.0
        names = list(self.WEIGHTS)
        if stage in names:
            for earlier in names[: names.index(stage)]:
                if earlier not in ("sample", "judge") or stage not in ("sample", "judge"):
                    self._done.setdefault(earlier, 1.0)
        share = sum(w * self._done.get(name, 0.0) for name, w in self.WEIGHTS.items())
        return round(100 * share, 1)

    def start(self, stage: str, total: int) -> None:
        with self._lock:
            percent = self._percent(stage, 0, total)
            if self._id is None:
                self._id = _existing_progress()
            if self._id is None:
                created = create_progress_artifact(
                    progress=percent,
                    key=KEY_PROGRESS,
                    description="Share of the calibration's work done (compress, sample, judge).",
                )
                self._id = cast(UUID, created)  # sync call: async_dispatch returns the value
                self._sent = percent
            else:
                self._send(percent)

    def advance(self, stage: str, done: int, total: int, cached: int = 0) -> None:
        with self._lock:
            now = time.monotonic()
            if self._id is not None and (now - self._last > 0.5 or done == total):
                self._last = now
                self._send(self._percent(stage, done, total))

    def finish(self, stage: str) -> None:
        with self._lock:
            if self._id is not None:
                self._send(self._percent(stage, 1, 1))

    def complete(self) -> None:
        """The run is done: 100 %, whichever stages had work left in this attempt."""
        with self._lock:
            if self._id is not None:
                self._send(100.0)

    def _send(self, percent: float) -> None:
        """Update the artifact, unless it already shows `percent` (an API round trip each)."""
        assert self._id is not None
        if percent != self._sent:
            update_progress_artifact(self._id, percent)
            self._sent = percent


def _existing_progress() -> UUID | None:
    """The progress artifact an earlier attempt of this flow run created, if any."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    run = flow_run_id()
    if run is None:
        return None
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(run)]),
                key=ArtifactFilterKey(any_=[KEY_PROGRESS]),
            )
        )
    return found[0].id if found else None


def effective_parameters(asked: CalibrateParams, cal: Calibration) -> CalibrateParams:
    """The flow's parameters as the run ran: the run's own settings (a resumed run's, its
    sample seed included) and the options asked for, `resume` naming the run resumed."""
    from tokenlens.calibration.params import CalibrateParams

    options = asked.model_dump(exclude=set(type(cal.config).model_fields))
    if asked.resume is not None:
        options["resume"] = cal.store.run_id
    return CalibrateParams(**cal.config.model_dump(), **options)


def record_effective_parameters(asked: CalibrateParams, cal: Calibration) -> CalibrateParams:
    """Rewrite the flow run's parameters to what runs, and publish the run-summary
    artifact saying what differs from what was asked; returns the effective parameters."""
    from prefect.client.orchestration import get_client

    ran = effective_parameters(asked, cal)
    run = flow_run_id()
    if run is not None:
        with get_client(sync_client=True) as client:
            client.update_flow_run(UUID(run), parameters=ran.flow_kwargs())
    create_markdown_artifact(
        key=KEY_RUN,
        markdown=run_summary(asked, ran, cal),
        description="The settings this run ran with (a resume takes its run's own).",
    )
    return ran


def run_summary(asked: CalibrateParams, ran: CalibrateParams, cal: Calibration) -> str:
    """Markdown: the run, its attempt, and every setting it ran with (what was asked for
    beside it where that differs)."""
    attempts = cal.run.attempts if cal.run is not None else 1
    lines = [f"## Run {cal.store.run_id}", ""]
    if asked.resume is not None:
        lines.append(
            f"Resumed run `{cal.store.run_id}` (asked: `resume={asked.resume}`): its own "
            "settings and sample seed apply, not this flow run's other parameters."
        )
    else:
        lines.append(f"Calibration `{cal.calibration_id}`, sample seed {ran.seed}.")
    lines += ["", f"Attempt {attempts} of this run.", ""]
    lines += ["| setting | ran with | asked for |", "|---|---|---|"]
    wanted, used = asked.flow_kwargs(), ran.flow_kwargs()
    for name, value in used.items():
        differs = wanted.get(name) != value
        lines.append(
            f"| {table_cell(name)} | {table_cell(_shown(value))} | "
            f"{table_cell(_shown(wanted.get(name))) if differs else ''} |"
        )
    return "\n".join(lines)


def _shown(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "—"
    return str(value)


def run_spend(cal: Calibration) -> RunSpend:
    """What the run paid over every attempt and shard, from the ledger's view."""
    attempts = cal.run.attempts if cal.run is not None else 1
    ledger, run = cal.calls.ledger, cal.store.run_id
    return RunSpend.of(run, ledger.paid_by(run), attempts, in_flight=ledger.in_flight(run))


def publish_spend(cal: Calibration, estimate: str) -> None:
    text = spend_text(cal.calls.spend, estimate, run_spend(cal))
    create_markdown_artifact(
        markdown="## Spend\n\n" + text.replace("\n", "\n\n"),
        key=KEY_SPEND,
        description="What this calibration run cost: the plan, then every attempt's calls.",
    )


def publish_results(
    cal: Calibration, curve: Curve, published: Published, lines: list[str], estimate: str
) -> None:
    """The curve, policy, report, trend and spend artifacts of a finished run."""
    create_table_artifact(
        table=curve_records(curve),
        key=KEY_CURVE,
        description=f"Quality curve per class and arm, ladder order (judge: {curve.judge}).",
    )
    policy = published.policy
    markdown = [
        f"## Policy of run {cal.store.run_id}",
        "",
        f"Calibration `{policy.calibration_id}`, model `{policy.model}`, judge "
        f"`{policy.judge}`, tolerance {policy.tolerance:.0%}, mode `{policy.mode}`.",
        "",
        *policy_markdown(lines),
        "",
        "Why:",
        "",
        *[
            f"- **{table_cell(entry.task_class)}** {entry.mark} {entry.reason}"
            for entry in [*policy.classes.values(), policy.default]
        ],
        "",
        where_markdown("Policy file", published.policy_path) + ".",
    ]
    stored = cast("list[CompressionRow]", cal.store.read("compressions"))
    unavailable = unavailable_arms(stored)
    if unavailable:
        markdown += ["", "Arms not measured here:"]
        markdown += [f"- `{arm}`: {reason}" for arm, reason in unavailable.items()]
    create_markdown_artifact(
        markdown="\n".join(markdown),
        key=KEY_POLICY,
        description="The published policy: ✓ measured, ? provisional, — none.",
    )
    create_markdown_artifact(
        markdown=report_artifact(published, tables_dir=cal.store.run_dir.url),
        key=KEY_REPORT,
        description="The calibration report (verdicts, per-class table, noise floors, plot).",
    )
    create_markdown_artifact(
        markdown=trend_markdown(str(cal.config.store), str(cal.config.reports)),
        key=KEY_TREND,
        description="Per class over the last runs: verdict, arm, retention, noise floor.",
    )
    publish_spend(cal, estimate)

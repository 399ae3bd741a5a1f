"""Human-readable summaries of a run for the Prefect UI: the curve table and the spend."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokenlens.calibration.history import (
    HISTORY_HEADER,
    history_cells,
    history_rows,
    load_history,
)
from tokenlens.calibration.run_settings import mixed_settings
from tokenlens.compress.arms import Arm
from tokenlens.decision import ALL_CLASSES
from tokenlens.formatting import PANE_WIDTH, arm_label, interval, markdown_table, pct, plural

if TYPE_CHECKING:
    from tokenlens.calibration.stage_publish import Published
    from tokenlens.decision import Curve
    from tokenlens.ledger import CallRecord, SpendMeter


def table_cell(text: str) -> str:
    """A cell that a markdown renderer shows as written (Prefect renders table cells as
    markdown): no e-mail autolink out of `prune@0.4`, no bold out of `__all__`."""
    out = text.replace("\\", "\\\\")
    for char in "*_`[]<>|#~":
        out = out.replace(char, "\\" + char)
    return out.replace("@", "&#64;")


def curve_records(curve: Curve) -> list[dict[str, Any]]:
    """The curve as a small table for people: classes in curve order (all classes last),
    arms in ladder order (control first), the status second so it is never cut off."""
    table = curve.table
    order = {name: i for i, name in enumerate([*curve.classes(), ALL_CLASSES])}
    rows = sorted(
        table.to_dict(orient="records"),
        key=lambda r: (order.get(r["task_class"], len(order)), Arm.parse(r["arm"]).ladder_rank),
    )
    records = []
    for row in rows:
        name = "all classes" if row["task_class"] == ALL_CLASSES else str(row["task_class"])
        records.append(
            {
                "class": table_cell(name),
                "arm": table_cell(arm_label(str(row["arm"]))),
                "status": table_cell(str(row["status"]).replace("_", " ")),
                "reduction": pct(row["reduction"]),
                "retention [95%]": (
                    f"{pct(row['retention'])} "
                    f"[{interval(row['retention_low'], row['retention_high'])}]"
                ),
                "floor": pct(row["noise_floor"]),
                "tasks/pairs": f"{int(row['n_tasks'])} / {int(row['n_pairs'])}"
                + (f", {plural(int(row['n_errors']), 'error')}" if row["n_errors"] else ""),
            }
        )
    return records


def spend_line(spend: SpendMeter) -> str:
    """What the run paid: `0 new calls, $0 this run` when the ledger had everything."""
    if spend.new_calls == 0:
        return "0 new calls, $0 this run"
    unpriced = f" ({spend.unpriced_calls} without a price)" if spend.unpriced_calls else ""
    return f"{spend.new_calls} new calls, ${spend.spent:.4f} this run{unpriced}"


@dataclass(frozen=True)
class RunSpend:
    """What a run paid over all its attempts and shards: the ledger's calls stamped with
    its id (a crashed attempt's calls included; a call another run paid for excluded),
    and the calls sent but never answered nor failed (`Ledger.in_flight`): in flight
    when an attempt was killed."""

    run_id: str
    calls: int
    usd: float
    unpriced: int
    attempts: int
    in_flight: int = 0

    @classmethod
    def of(
        cls, run_id: str, paid: Iterable[CallRecord], attempts: int, *, in_flight: int = 0
    ) -> RunSpend:
        costs = [record.completion.cost_usd for record in paid]
        return cls(
            run_id=run_id,
            calls=len(costs),
            usd=sum(cost for cost in costs if cost is not None),
            unpriced=sum(1 for cost in costs if cost is None),
            attempts=attempts,
            in_flight=in_flight,
        )

    def line(self) -> str:
        unpriced = f" ({self.unpriced} without a price)" if self.unpriced else ""
        tries = f"{self.attempts} attempts" if self.attempts != 1 else "1 attempt"
        return f"{self.calls} paid calls, ${self.usd:.4f}{unpriced} over {tries}"


def spend_text(spend: SpendMeter, estimate: str | None, run: RunSpend | None = None) -> str:
    """The spend artifact's lines: the plan, the run's spend from the ledger (every
    attempt and shard), this attempt's, and the cap.

    A call is in the ledger once it returned; one in flight when its process was killed
    never is, though the upstream may bill it. Each call leaves an intent in the ledger's
    store before it is sent, removed once it ended, so the run's leftover intents count
    those calls exactly."""
    lines = []
    if estimate:
        lines.append(f"Planned before any call: {estimate}.")
    if run is None:
        lines.append(f"Spent: {spend_line(spend)}.")
    else:
        lines.append(f"Spent: {run.line()}: every call of run {run.run_id} in the ledger.")
        if (run.calls, run.attempts) != (spend.new_calls, 1):
            lines.append(f"Of which this attempt: {spend.new_calls} new calls, ${spend.spent:.4f}.")
        if run.in_flight:
            lines.append(
                f"In flight at a kill: {plural(run.in_flight, 'call')} sent with no answer "
                "stored (an attempt was killed or crashed while waiting for them): the "
                "upstream may have billed them; they are not counted above."
            )
        elif run.attempts > 1:
            lines.append("In flight at a kill: none (no earlier attempt ended mid-call).")
    if spend.max_spend is not None:
        lines.append(f"Max spend: ${spend.max_spend:.2f} (all attempts together).")
    return "\n".join(lines)


def where_markdown(what: str, where: str) -> str:
    """How an artifact names a file of the store: a link only where a browser can open it
    (an ``http(s)://`` store), the URL as text for other URLs (``s3://``: no browser opens
    it), and the path "on the worker" for a local store; never a ``file://`` link, which
    opens nothing but the worker's own disk."""
    scheme = where.split("://", 1)[0].lower() if "://" in where else ""
    if scheme in ("http", "https"):
        return f"[{what}]({where})"
    if scheme and scheme != "file":
        return f"{what} `{where}`"
    return f"{what} `{where.removeprefix('file://')}` on the worker"


def report_artifact(published: Published, *, tables_dir: str) -> str:
    """The run's markdown report with its plot inlined as a data URI, so the Prefect UI
    shows both from any machine, followed by where the report and tables are stored."""
    where = f"{where_markdown('report', published.report_path)}, " + where_markdown(
        "tables", tables_dir
    )
    if published.markdown is None:
        return f"Report written: {where}."
    text = published.markdown
    if published.plot_png:
        uri = "data:image/png;base64," + base64.b64encode(published.plot_png).decode("ascii")
        text = text.replace(f"]({published.plot_name})", f"]({uri})")
    return text + f"\n\n---\n\nStored: {where}.\n"


def trend_markdown(store: str, reports: str, *, last: int = 10) -> str:
    """The `calibration-trend` artifact: `tokenlens history` as a markdown table."""
    states = load_history(store, reports, last=last)
    rows = history_rows(states)
    lines = [
        f"## Trend over the last {plural(len(states), 'run')}",
        "",
        "⚠ marks a significant change: an interval that no longer overlaps the previous "
        "run's (the tracked arm's retention, or the noise floor).",
        "",
    ]
    mixed = mixed_settings(states)
    if mixed:
        lines += ["These runs were not all measured the same way:", ""]
        lines += [f"- {table_cell(line)}" for line in mixed]
        lines += [""]
    table = markdown_table(
        HISTORY_HEADER, history_cells(rows), cell=table_cell, max_width=PANE_WIDTH
    )
    return "\n".join([*lines, table])

"""Human-readable summaries of a run for the Prefect UI: the curve table and the spend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokenlens.decision import Curve
    from tokenlens.ledger import SpendMeter


def curve_records(curve: Curve) -> list[dict[str, Any]]:
    """The curve as a small table for humans (percentages, rounded)."""

    def pct(value: Any) -> str:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return ""
        return "" if number != number else f"{100 * number:.1f}%"

    records = []
    for row in curve.table.to_dict(orient="records"):
        records.append(
            {
                "class": row["task_class"],
                "arm": row["arm"],
                "reduction": pct(row["reduction"]),
                "retention": pct(row["retention_mean"]),
                "interval": f"{pct(row['retention_low'])}–{pct(row['retention_high'])}"
                if pct(row["retention_low"])
                else "",
                "noise floor": pct(row["noise_floor"]),
                "bar": pct(row["bar"]),
                "pairs": int(row["n_pairs"]),
                "errors": int(row["n_errors"]),
                "status": row["status"],
            }
        )
    return records


def spend_text(spend: SpendMeter, estimate: str | None) -> str:
    lines = []
    if estimate:
        lines.append(f"Estimate before calls: {estimate}.")
    priced = f"${spend.spent:.4f}"
    lines.append(
        f"Spent this run: {priced} on {spend.new_calls} new calls"
        + (f" ({spend.unpriced_calls} without a price)" if spend.unpriced_calls else "")
        + "."
    )
    if spend.max_spend is not None:
        lines.append(f"Max spend: ${spend.max_spend:.2f}.")
    return "\n".join(lines)

"""Work a run can do while it waits on the network, so the waits are not followed by it.

A calibration's paid stage spends its wall time waiting for model calls, with the CPU
mostly idle; what the stages after it load the first time they run (the report's
matplotlib and Jinja2, fonts, the decision modules: ~1 s of imports on 2 cores) would
otherwise be paid after the last reply. `warm_publishing` loads it on a side thread while
the calls are in flight. Likewise `warm_compression` loads the tokenizer (~0.3 s) and the
ladder while the run is opened and recorded (file and Prefect API round trips). It
computes nothing the run keeps: a failure here is ignored, and the stage that needs the
module loads it again as it always did.
"""

from __future__ import annotations

import io


def warm_compression() -> None:
    """Load the offline tokenizer and the ladder's modules."""
    try:
        import tokenlens.compress
        import tokenlens.judge
        from tokenlens.tokens import estimate_tokens

        estimate_tokens("warm")
        tokenlens.compress.__name__  # noqa: B018 - keep the import used
    except Exception:
        return


def warm_publishing() -> None:
    """Import what aggregate and publish use and draw one tiny figure (fonts, renderers)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        import tokenlens.decision.applied
        import tokenlens.report

        figure = Figure(figsize=(1, 1), dpi=20)
        FigureCanvasAgg(figure)
        axes = figure.subplots()
        axes.errorbar([0.5], [0.5], yerr=[[0.1], [0.1]], fmt="o", capsize=3)
        axes.annotate("warm", (0.5, 0.5), fontsize=7)
        axes.set_title("warm")
        figure.savefig(io.BytesIO(), format="png")
        figure.savefig(io.StringIO(), format="svg")
        tokenlens.decision.applied.__name__  # noqa: B018 - keep the import used
    except Exception:
        return

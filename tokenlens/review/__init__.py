"""Checking the judge against people: a blind review page and agreement figures.

- `sample`: which judged pairs are reviewed (stratified), and the blind view of each
- `store`: the sample and every grade, in the run's store, written as given
- `app`: the starlette page (Jinja2 templates in `templates/`)
- `agreement`: Krippendorff's alpha with a bootstrap interval; decision agreement
- `figures`: judge vs people, judges, people vs people, per class; `poor_agreement`
- `summary`: the figures as text
- `session`: opening a run's review
"""

from tokenlens.review.figures import (
    POOR_ALPHA,
    ReviewFigures,
    poor_agreement,
    review_figures,
    with_review_flags,
)

__all__ = ["POOR_ALPHA", "ReviewFigures", "poor_agreement", "review_figures", "with_review_flags"]

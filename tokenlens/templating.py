"""HTML pages from Jinja2 templates (`tokenlens/templates/*.html.j2`), autoescaped.

Why templates: the report and the dashboard show data that came from requests and task
files; with autoescaping every `{{ value }}` is escaped unless the code marks it safe, so
no call site can forget. Callers pass plain strings and numbers already formatted for
people (`tokenlens.formatting`); the templates hold only the markup. Light enough for the
proxy (jinja2 and markupsafe only).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def environment() -> Environment:
    """One environment per process: templates are compiled once and then cached."""
    return Environment(
        loader=PackageLoader("tokenlens", "templates"),
        autoescape=True,
        undefined=StrictUndefined,  # a misspelled name fails, never renders as ""
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, **context: Any) -> str:
    """The template `name` (e.g. ``report.html.j2``) rendered with `context`."""
    return environment().get_template(name).render(**context)

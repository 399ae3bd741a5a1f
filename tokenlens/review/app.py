"""The review page: a small starlette app that shows one blind case at a time.

Routes (all HTML; the page works without script, the script only adds shortcuts):

    GET  /                              ask for a reviewer name
    GET  /r/<reviewer>/                 resume: the next case this reviewer has not graded
    GET  /r/<reviewer>/case/<case-id>   one case, as the judge saw it
    POST /r/<reviewer>/case/<case-id>   store the grades, go on to the next ungraded case
    GET  /r/<reviewer>/done             all cases graded

Blind by construction: templates receive a `BlindCase` (no arm, rate or grade in it) and
the reviewer's own grades, nothing else. Jinja2 autoescapes every value, and the
Content-Security-Policy allows only our own script file. Bad input (a grade off the scale,
an unknown case, a bad name) gets a 4xx that says what and where, and nothing is stored.
The page has no login (it binds loopback only): a grade posted from another origin, or a
request under a host name other than 127.0.0.1/localhost, is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from tokenlens.review.sample import ReviewError, ReviewSample, RunTables, blind_case
from tokenlens.review.store import SCALE_MAX, SCALE_MIN, ReviewStore, check_reviewer

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # "no-referrer" would make form posts say Origin: null
    "cache-control": "no-store",
}
_MAX_FORM_BYTES = 4096


@dataclass(frozen=True)
class Review:
    """What the app serves: a run's tables, its review sample and store."""

    run: RunTables
    sample: ReviewSample
    store: ReviewStore
    instructions: str


class BadInput(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("tokenlens.review", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def parse_grade(form: dict[str, list[str]], side: str) -> int | None:
    """One answer's grade from the form: an integer on the scale, or None for can't tell."""
    field = f"grade_{side}"
    raw = (form.get(field) or [""])[0].strip()
    cant_tell = bool(form.get(f"cant_tell_{side}"))
    if cant_tell and raw:
        raise BadInput(422, f"answer {side.upper()}: give a grade or mark can't tell, not both")
    if cant_tell:
        return None
    if not raw:
        raise BadInput(422, f"answer {side.upper()}: no grade (or mark can't tell)")
    try:
        value = int(raw, 10)
    except ValueError:
        raise BadInput(
            422,
            f"answer {side.upper()}: {raw[:20]!r} is not a whole number {SCALE_MIN}-{SCALE_MAX}",
        ) from None
    if not SCALE_MIN <= value <= SCALE_MAX:
        raise BadInput(
            422, f"answer {side.upper()}: {value} is outside the scale {SCALE_MIN}-{SCALE_MAX}"
        )
    return value


async def _read_form(request: Request) -> bytes:
    """The body, read no further than `_MAX_FORM_BYTES` (a grade form is tiny)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            raise BadInput(413, f"form of more than {_MAX_FORM_BYTES} bytes; a grade form is tiny")
    return bytes(body)


def create_app(review: Review) -> Starlette:
    env = _environment()
    script = files("tokenlens.review").joinpath("templates/review.js").read_text("utf-8")
    sample, store = review.sample, review.store

    def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(total=len(sample.cases), **context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error_page(exc: BadInput) -> HTMLResponse:
        return page("error.html", exc.status, message=exc.message)

    def reviewer_of(request: Request) -> str:
        name = str(request.path_params["reviewer"])
        try:
            return check_reviewer(name)
        except ReviewError as exc:
            raise BadInput(400, str(exc)) from None

    def case_of(request: Request) -> Any:
        case_id = str(request.path_params["case_id"])
        case = sample.case(case_id)
        if case is None:
            raise BadInput(404, f"case {case_id[:40]!r} is not in this review's sample")
        return case

    def case_page(
        reviewer: str,
        case: Any,
        status: int = 200,
        error: str | None = None,
        entered: dict[str, str] | None = None,
    ) -> HTMLResponse:
        blind = blind_case(review.run, sample, case)
        own = store.grade(reviewer, case.case_id)
        graded = {g.case_id for g in store.grades(reviewer)}
        prev_case = next((c for c in sample.cases if c.position == case.position - 1), None)
        next_case = next((c for c in sample.cases if c.position == case.position + 1), None)
        values = entered or {
            "a": "" if own is None or own.grade_a is None else str(own.grade_a),
            "b": "" if own is None or own.grade_b is None else str(own.grade_b),
        }
        cant = {
            "a": bool(own is not None and own.grade_a is None) if entered is None else False,
            "b": bool(own is not None and own.grade_b is None) if entered is None else False,
        }
        return page(
            "case.html",
            status,
            reviewer=reviewer,
            case=blind,
            instructions=review.instructions,
            graded=len(graded),
            already=own is not None,
            values=values,
            cant=cant,
            error=error,
            prev_id=prev_case.case_id if prev_case else None,
            next_id=next_case.case_id if next_case else None,
            scale_min=SCALE_MIN,
            scale_max=SCALE_MAX,
        )

    async def home(request: Request) -> Response:
        name = request.query_params.get("reviewer")
        if name is None:
            return page("start.html", reviewers=store.reviewers())
        try:
            check_reviewer(name)
        except ReviewError as exc:
            return error_page(BadInput(400, str(exc)))
        return RedirectResponse(f"/r/{quote(name)}/", status_code=303)

    async def resume(request: Request) -> Response:
        try:
            reviewer = reviewer_of(request)
        except BadInput as exc:
            return error_page(exc)
        case = store.next_ungraded(sample, reviewer)
        target = f"/r/{quote(reviewer)}/" + (f"case/{case.case_id}" if case else "done")
        return RedirectResponse(target, status_code=303)

    async def show(request: Request) -> Response:
        try:
            return case_page(reviewer_of(request), case_of(request))
        except BadInput as exc:
            return error_page(exc)

    async def grade(request: Request) -> Response:
        try:
            origin = request.headers.get("origin")
            own = f"{request.url.scheme}://{request.url.netloc}"
            if origin is not None and origin != own:
                raise BadInput(403, f"grades are taken from this page only, not from {origin[:80]}")
            reviewer = reviewer_of(request)
            case = case_of(request)
            if request.headers.get("content-type", "").split(";")[0].strip() != (
                "application/x-www-form-urlencoded"
            ):
                raise BadInput(415, "send the grades as a form (application/x-www-form-urlencoded)")
            body = await _read_form(request)
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        except BadInput as exc:
            return error_page(exc)
        try:
            grade_a, grade_b = parse_grade(form, "a"), parse_grade(form, "b")
        except BadInput as exc:
            entered = {s: (form.get(f"grade_{s}") or [""])[0][:20] for s in ("a", "b")}
            return case_page(reviewer, case, exc.status, exc.message, entered)
        try:
            store.record(sample, reviewer, case.case_id, grade_a, grade_b)
        except ReviewError as exc:
            return error_page(BadInput(422, str(exc)))
        following = store.next_ungraded(sample, reviewer)
        if following is None:
            return RedirectResponse(f"/r/{quote(reviewer)}/done", status_code=303)
        return RedirectResponse(f"/r/{quote(reviewer)}/case/{following.case_id}", status_code=303)

    async def done(request: Request) -> Response:
        try:
            reviewer = reviewer_of(request)
        except BadInput as exc:
            return error_page(exc)
        graded = len({g.case_id for g in store.grades(reviewer)})
        return page("done.html", reviewer=reviewer, graded=graded)

    async def js(request: Request) -> Response:
        return Response(script, media_type="text/javascript", headers=SECURITY_HEADERS)

    return Starlette(
        routes=[
            Route("/", home),
            Route("/static/review.js", js),
            Route("/r/{reviewer}/", resume),
            Route("/r/{reviewer}/done", done),
            Route("/r/{reviewer}/case/{case_id}", show, methods=["GET"]),
            Route("/r/{reviewer}/case/{case_id}", grade, methods=["POST"]),
        ],
        # Loopback names only: a page elsewhere cannot reach this one by DNS rebinding.
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"])],
    )

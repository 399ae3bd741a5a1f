"""One error tree for the whole package.

Foreign exceptions (pydantic, anthropic, llama_cpp, OSError) are translated into these at
one boundary each, with ``raise ... from exc``, so callers catch ``TokenLensError`` and
the CLI turns it into a clear message and a non-zero exit.
"""

from __future__ import annotations

import json


class TokenLensError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code = 2


class TaskFileError(TokenLensError):
    """A calibration task file is missing or malformed (message names file, line, field)."""


class CompressionError(TokenLensError):
    """A compression arm failed on a request."""


class ArmUnavailable(CompressionError):
    """An arm cannot run here (e.g. LLMLingua-2 weights cannot be loaded); carries the reason."""


class ModelCallError(TokenLensError):
    """A model call failed. ``retryable`` says whether trying again could help; ``cause``,
    when the backend knows it, is the short reason the same outage gives on every call
    (e.g. "connection refused to http://host:port"), which the circuit breaker reports."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        cause: str | None = None,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.cause = cause


class UpstreamUnavailable(ModelCallError):
    """A client's circuit breaker is open: every attempt through it failed for a while
    (`tokenlens.models.breaker`). Not retryable; a run that meets it stops, keeping the
    tables of what finished, and says `cause` (e.g. "connection refused to http://...")."""

    def __init__(self, message: str, *, cause: str) -> None:
        super().__init__(message, retryable=False, status=None, cause=cause)


class JudgeError(TokenLensError):
    """The judge returned something that is not a valid grade (never turned into a 0)."""


class PolicyError(TokenLensError):
    """A policy file is missing, corrupt or of an unknown schema version."""


class SpendLimitReached(TokenLensError):
    """The run's max spend was reached; finished calls are kept in the ledger."""

    exit_code = 3


class CalibrationUnresolved(TokenLensError):
    """A requested class ended unmeasurable, with no arm held, or with too few tasks.

    Raised by the scheduled flow *after* the policy and report are published, so the
    flow run ends Failed and an automation can notify on it; names the classes."""

    exit_code = 4

    def __init__(self, classes: list[str], run_id: str, report: str):
        super().__init__(
            f"calibration run {run_id}: no certified arm for {', '.join(classes)} "
            f"(unmeasurable, no arm held, or too few tasks); policy and report were "
            f"published: {report}"
        )
        self.classes = classes


def json_problem(exc: json.JSONDecodeError) -> str:
    """`Expecting ',' delimiter at column 67`: the decoder's words with the column once.

    Some of its messages already end in "at" ("Unterminated string starting at"), which a
    plain `f"{exc.msg} at column {n}"` would double."""
    joiner = " " if exc.msg.endswith(" at") else " at "
    return f"{exc.msg}{joiner}column {exc.colno}"

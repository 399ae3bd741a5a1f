"""Captured traffic on disk: the record schema the proxy writes and `tasks harvest` reads.

Why a module of its own: the proxy (writer, `tokenlens.proxy.capture`) and the harvester
(reader, `tokenlens.harvest`) must agree on one shape, and neither should import the other
(the harvester knows nothing of the proxy; the proxy imports no calibration code).

A capture store is a folder (or fsspec URL) of part files ``capture-*.jsonl``, one JSON
object per line, already redacted when written. Two kinds of line:

* ``request``: one sampled Messages request: the body as received (before compression),
  the class the proxy chose and how, the model, and the upstream's answer text when the
  answer was to that original body (pass-through, or a compression that fell back).
* ``replay``: the shadow judge's answer to a captured body it replayed uncompressed,
  joined to its request by ``body_sha256`` (the replay finishes after the request's line).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tokenlens.errors import TokenLensError, json_problem

CAPTURE_SCHEMA_VERSION = 1
PART_GLOB = "capture-*.jsonl"
#: How the class was decided: the proxy's own classifier result (`header`, `model`, `rules`,
#: `default`), or, when the proxy had no policy and so classified nothing, the same rules
#: run by the capture writer over the starter set's class names.
ClassSource = Literal["header", "model", "rules", "default"]


class CaptureError(TokenLensError):
    """A capture store is missing or holds a line that is not a capture record."""


class CapturedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["request"] = "request"
    v: int = CAPTURE_SCHEMA_VERSION
    time: float
    body_sha256: str
    model: str
    task_class: str
    class_source: ClassSource
    #: "proxy": the class the proxy applied; "capture": no policy, classified for the record.
    class_decided_by: Literal["proxy", "capture"]
    #: The arm the proxy applied ("none" when it forwarded the body unchanged).
    arm: str
    body: dict[str, Any]
    answer: str | None = None


class CapturedReplay(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["replay"] = "replay"
    v: int = CAPTURE_SCHEMA_VERSION
    time: float
    body_sha256: str
    answer: str


def body_digest(body: Any) -> str:
    """Content key of a parsed body: the same for the request line and its replay."""
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def part_files(store: str | Path) -> tuple[Any, list[str]]:
    """(filesystem, part paths in name = time order) of a store folder, URL or one file.

    A local path or any fsspec URL (``s3://bucket/captures``, as `serve --capture` takes).
    """
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(str(store))
        if fs.isfile(root):
            return fs, [root]
        if not fs.isdir(root):
            raise CaptureError(f"{store}: no capture store (neither a folder nor a file)")
        return fs, sorted(fs.glob(f"{root.rstrip('/')}/**/{PART_GLOB}"))
    except (OSError, ValueError, ImportError) as exc:
        raise CaptureError(f"{store}: cannot read the capture store ({exc})") from exc


def read_records(store: str | Path) -> Iterator[CapturedRequest | CapturedReplay]:
    """Every record of a store, strictly: a bad line fails with `file:line` and the field."""
    fs, paths = part_files(store)
    for path in paths:
        with fs.open(path, "rt", encoding="utf-8") as lines:
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CaptureError(
                        f"{path}:{lineno}: malformed JSON ({json_problem(exc)})"
                    ) from exc
                kind = raw.get("kind") if isinstance(raw, dict) else None
                if kind not in ("request", "replay"):
                    raise CaptureError(f"{path}:{lineno}: field 'kind' is not request or replay")
                try:
                    if kind == "request":
                        yield CapturedRequest.model_validate(raw)
                    else:
                        yield CapturedReplay.model_validate(raw)
                except ValidationError as exc:
                    err = exc.errors()[0]
                    field = ".".join(str(part) for part in err["loc"])
                    raise CaptureError(f"{path}:{lineno}: field '{field}' {err['msg']}") from exc

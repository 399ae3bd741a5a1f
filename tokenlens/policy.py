"""The published policy: which arm each task class may use, and why.

This module owns the policy file's schema. It is read by the proxy on its hot-reload
path, so it imports nothing heavy (no pandas, no prefect). The decision logic that
produces a policy lives in `tokenlens.decision`.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tokenlens.classifier.bundle import ClassifierBundle
from tokenlens.compress.arms import Arm
from tokenlens.compress.toolout.rungs import ToolArm
from tokenlens.errors import PolicyError
from tokenlens.storage import Location, StorageError, is_url, location

#: 2 added per-entry certification dates (`certified_at`, `expires_at`, `carried_over`)
#: and the policy's `backend`; version-1 files load unchanged (no dates: no age limit).
#: 3 added the level of an interval's bounds (`Interval.confidence`) and the retention
#: corrected by people's grades (`people_*`); older files load unchanged.
#: 4 added the per-kind arms for tool output (`Policy.tool_output`); older files load
#: unchanged (no tool-output arms: tool results pass as they came).
SCHEMA_VERSION = 4
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4)
DEFAULT_POLICY_DIR = Path("reports") / "policy"

#: ✓ measured, ? provisional, — none.
Verdict = Literal["measured", "provisional", "none"]
VERDICT_MARK: dict[str, str] = {"measured": "✓", "provisional": "?", "none": "—"}
#: Why a class got `none` (machine-readable; `reason` says it in words). `unmeasurable`
#: , `no_arm_held` and `too_few_tasks` make `tokenlens calibrate` exit non-zero;
#: `nothing_compressible` does not (there was nothing to decide).
NoneCause = Literal["unmeasurable", "no_arm_held", "nothing_compressible", "too_few_tasks"]
#: Causes that mean the run could not *measure* the class (outage, spend cap, a control too
#: noisy, too few graded pairs), as opposed to measuring a failure (`no_arm_held`: the arm
#: lost, so it is retracted at once). For these the last certified entry is carried over
#: until its age limit (`tokenlens.decision.carryover`).
COULD_NOT_MEASURE: tuple[NoneCause, ...] = ("unmeasurable", "too_few_tasks")


class Interval(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float
    high: float
    #: One-sided confidence of each bound (0.95, or what a sequential look spent, e.g.
    #: 0.981). None in files written before schema 3.
    confidence: float | None = None


class CarriedOver(BaseModel):
    """Why an entry comes from an earlier run: the newest run could not measure its class."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The run (and calibration) whose measurement certified the entry.
    from_run: str | None = None
    from_calibration: str
    #: The first run that could not measure the class (carried over since then).
    since: datetime
    since_run: str | None = None
    #: What the newest run found instead, in words (its `none` entry's reason).
    why: str


class PolicyEntry(BaseModel):
    """The decision for one task class (or `default`), with the numbers behind it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_class: str
    verdict: Verdict
    #: The chosen arm's method and rate; method "none" when nothing may be applied.
    method: str = "none"
    rate: float | None = None
    reduction_pct: float | None = None
    #: The rule's reading: pooled retention (interval mode) or the capped mean (mean
    #: mode), capped at 1.0, with its one-sided bounds (and their level) as
    #: `retention_interval`.
    retention_mean: float | None = None
    retention_interval: Interval | None = None
    #: The same arm's retention as people would grade it: the judge's pairs corrected by
    #: people's grades of the reviewed ones (`tokenlens.decision.people`), with its
    #: one-sided 95 % bounds and how many reviewed pairs it rests on. None until a review
    #: of the run has enough grades (`tokenlens review --summary` fills it).
    people_retention: float | None = None
    people_interval: Interval | None = None
    people_pairs: int | None = None
    worst_case: float | None = None
    noise_floor: float | None = None
    noise_floor_interval: Interval | None = None
    #: The floor split into judge inconsistency and sampling noise (when the run re-judged
    #: control pairs); the two add up to `noise_floor`.
    floor_judge: float | None = None
    floor_sampling: float | None = None
    bar: float | None = None
    #: Kept for policy files written before the pooled estimator; no longer filled (the
    #: rule's interval is `retention_interval`).
    adjusted_interval: Interval | None = None
    #: Tasks the minimum-evidence rule asks for a ? and a ✓ (interval mode).
    tasks_needed: int | None = None
    tasks_needed_measured: int | None = None
    n_tasks: int = 0
    n_pairs: int = 0
    reason: str
    cause: NoneCause | None = None
    ignored_arms: tuple[str, ...] = ()
    #: When the run that measured this entry's arm published it, and the time after which
    #: the proxy no longer applies it (`certified_at` + the operator's `max_policy_age`).
    #: None in files written before schema 2, and for entries without an arm.
    certified_at: datetime | None = None
    expires_at: datetime | None = None
    #: Set when the entry was kept from an earlier run (see `CarriedOver`).
    carried_over: CarriedOver | None = None

    def expired(self, now: datetime) -> bool:
        """Past its age limit: the proxy must not apply it (an entry without one never is)."""
        return self.expires_at is not None and now >= self.expires_at

    @property
    def arm(self) -> Arm | None:
        """The arm to apply, or None for a `none` verdict."""
        if self.method == "none":
            return None
        return Arm(self.method, self.rate)

    @property
    def tool_arm(self) -> ToolArm | None:
        """The tool-output arm of an entry in `Policy.tool_output`, or None for `none`."""
        if self.method == "none":
            return None
        return ToolArm(self.method, self.rate)

    @property
    def mark(self) -> str:
        return VERDICT_MARK[self.verdict]


class Policy(BaseModel):
    """A versioned, self-describing policy file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = SCHEMA_VERSION
    created: datetime
    calibration_id: str = Field(min_length=8)
    #: The run that produced this file (one calibration has many runs; see
    #: `tokenlens.calibration.runs`). None in files written before runs existed.
    run_id: str | None = None
    model: str
    #: Where the answers came from: "local" is the embedded offline model, whose numbers
    #: describe the instrument, never Claude (`serve` refuses such a policy unless told).
    #: None in files written before schema 2 (`offline_reason` then reads the model name).
    backend: Literal["anthropic", "local"] | None = None
    judge: str
    tolerance: float
    mode: Literal["interval", "mean"]
    classes: dict[str, PolicyEntry]
    default: PolicyEntry
    #: The learned classifier the proxy routes with (fitted on the calibration's tasks);
    #: None: the proxy falls back to its hand-written rules.
    classifier: ClassifierBundle | None = None
    #: Per kind of tool output (`tokenlens.compress.toolout.kinds.KINDS`): the tool-output
    #: arm (method ``lossless`` or ``elide``) with the same verdicts and rules as a class's.
    #: Empty in files written before schema 4.
    tool_output: dict[str, PolicyEntry] = Field(default_factory=dict)

    def entry_for(self, task_class: str | None) -> PolicyEntry:
        """The entry for a class, falling back to `default` for unknown or missing classes."""
        if task_class is not None and task_class in self.classes:
            return self.classes[task_class]
        return self.default

    def entries(self) -> list[PolicyEntry]:
        """Every class's entry, then `default`."""
        return [*self.classes.values(), self.default]


def offline_reason(policy: Policy) -> str | None:
    """Why `policy` must not be applied to Claude traffic, or None when it may.

    A policy calibrated on the embedded local model measures how compression changes a
    135M model's answers, not Claude's. Files written before the `backend` field are
    judged by their model name (every Claude model id starts with "claude")."""
    if policy.backend == "local":
        return (
            f"it was calibrated offline on the embedded local model {policy.model!r}: its "
            "numbers describe the instrument on a tiny model, not Claude"
        )
    if policy.backend is None and not policy.model.startswith("claude"):
        return (
            f"it was calibrated on {policy.model!r}, which is not a Claude model (an offline "
            "run on the embedded local model, by its name): its numbers do not describe Claude"
        )
    return None


def age_limit(days: float | None) -> timedelta | None:
    """`max_policy_age` (days, None: no limit) as a timedelta."""
    return None if days is None else timedelta(days=days)


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """Validate policy JSON text. Raises PolicyError naming the source and the problem."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if isinstance(raw, dict) and raw.get("schema_version") not in (
        None,
        *READABLE_SCHEMA_VERSIONS,
    ):
        versions = ", ".join(map(str, READABLE_SCHEMA_VERSIONS))
        raise PolicyError(
            f"{source}: schema_version {raw.get('schema_version')!r} is not supported "
            f"(this tokenlens reads versions {versions})"
        )
    try:
        return Policy.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise PolicyError(f"{source}: invalid policy at '{where}': {first['msg']}") from exc


def load_policy(path: str | Path | Location) -> Policy:
    """Read and validate a policy file: a local path or a store URL (`tokenlens.storage`)."""
    if isinstance(path, Location) or is_url(path):
        where = location(path)
        try:
            text = where.read_text()
        except (OSError, StorageError) as exc:
            raise PolicyError(f"{where}: cannot read policy ({exc})") from exc
        return parse_policy(text, where.url)
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{file}: cannot read policy ({exc.strerror or exc})") from exc
    return parse_policy(text, str(file))


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    current = os.umask(0o022)  # elsewhere: the classic read-by-setting, restored at once
    os.umask(current)
    return current


def new_file_mode() -> int:
    """The mode `open()` would give a new file (0644 under the usual 022 umask).

    `tempfile.mkstemp` creates 0600 files; a policy or report published through it
    would be unreadable by a proxy running as another user."""
    return 0o666 & ~_umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file + fsync + rename, so readers never see a half-written file.

    The file gets the mode a plain `open()` would give it (see `new_file_mode`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, new_file_mode())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_policy(policy: Policy, directory: str | Path | Location = DEFAULT_POLICY_DIR) -> Location:
    """Publish to `<dir>/<calibration-id>.json` and `<dir>/latest.json`, each all at once.

    `directory` is a folder or a store URL (``s3://bucket/prefix/policy``): locally each
    file is replaced atomically with the umask's mode (`tokenlens.storage`), on an object
    store each is one PUT, which a reader (the proxy's `--policy s3://.../latest.json`)
    sees whole or not at all."""
    folder = location(directory)
    text = policy.model_dump_json(indent=2) + "\n"
    target = folder.child(f"{policy.calibration_id}.json")
    target.write_text(text)
    folder.child("latest.json").write_text(text)
    return target

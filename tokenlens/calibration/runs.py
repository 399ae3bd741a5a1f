"""Runs of a calibration: which sample was drawn, where its tables and reports live.

A *calibration* is what was measured (tasks, arms, models, judge, settings): its id keys
the tables' meaning and shares the call ledger. A *run* is one execution of it with one
*sample* — the seed the answer seeds are derived from. Running the same command again
draws the same sample (the config's `seed`), so every call is already in the ledger and
the run is free; a fresh sample (`fresh_sample`, what the nightly deployment asks for)
draws a new seed, so a schedule sees what the model does today, not yesterday's answers.

Every run writes a manifest `<store>/runs/<run-id>/run.json` (the store: a folder or a
URL, through `tokenlens.storage`) before its first call and
marks it finished at the end. A resumed run (`tokenlens calibrate --resume [RUN]`, or a
Prefect retry of the same flow run) reopens its manifest and reuses its seed and config,
so it pays only for the calls the interrupted run did not make.
"""

from __future__ import annotations

import os
import secrets
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tokenlens.config import CalibrationConfig
from tokenlens.errors import TokenLensError
from tokenlens.storage import Location, location

MANIFEST = "run.json"
RunStatus = Literal["running", "finished", "stopped"]


class RunManifest(BaseModel):
    """What a run was: its calibration, its sample seed, its settings and how it ended."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    calibration_id: str
    seed: int
    fresh_sample: bool
    created: datetime
    finished: datetime | None = None
    status: RunStatus = "running"
    flow_run_id: str | None = None
    #: The process running it (and its host), so a later run can tell it was killed.
    pid: int | None = None
    host: str | None = None
    #: How many times it was started: 1, plus one per resume or Prefect retry.
    attempts: int = 1
    config: dict[str, Any]

    def calibration_config(self) -> CalibrationConfig:
        """The settings the run was started with (its seed included)."""
        return CalibrationConfig.model_validate(self.config)


Where = str | Path | Location


def runs_dir(store: Where) -> Location:
    return location(store).child("runs")


def manifest_path(store: Where, run_id: str) -> Location:
    return runs_dir(store).child(run_id, MANIFEST)


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by time, unique enough for one store: `20261130-142501-3fa9c2`."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


def fresh_seed() -> int:
    """A new 31-bit sample seed (the same range as `cells.sample_seed`)."""
    return secrets.randbits(31)


def write_manifest(store: Where, manifest: RunManifest) -> Location:
    where = manifest_path(store, manifest.run_id)
    where.write_text(manifest.model_dump_json(indent=2) + "\n")
    return where


def parse_manifest(data: bytes, source: str) -> RunManifest:
    try:
        return RunManifest.model_validate_json(data)
    except ValidationError as exc:
        raise TokenLensError(f"{source}: not a readable run manifest ({exc})") from exc


def read_manifest(where: Where) -> RunManifest:
    target = location(where)
    try:
        data = target.read_bytes()
    except OSError as exc:
        raise TokenLensError(f"{target}: not a readable run manifest ({exc})") from exc
    return parse_manifest(data, str(target))


def list_runs(store: Where) -> list[RunManifest]:
    """Every run with a manifest under the store, oldest first (unreadable ones skipped).

    One listing of `runs/` and one concurrent read of the manifests (on S3: one LIST and
    parallel GETs, not a GET per file in turn)."""
    folder = runs_dir(store)
    raw = folder.read_many([run.child(MANIFEST) for run in folder.folders()])
    found: list[RunManifest] = []
    for path, data in raw.items():
        try:
            found.append(parse_manifest(data, path))
        except TokenLensError:
            continue
    return sorted(found, key=lambda m: (m.created, m.run_id))


def find_run(store: Where, ref: str | None = None) -> RunManifest:
    """A run by id, or the newest run of a calibration id; `None`: the newest unfinished run.

    Raises `TokenLensError` naming the store when nothing matches.
    """
    runs = list_runs(store)
    if ref is None:
        unfinished = [m for m in runs if m.status != "finished"]
        if not unfinished:
            raise TokenLensError(f"{runs_dir(store)}: no unfinished run to resume")
        return unfinished[-1]
    exact = [m for m in runs if m.run_id == ref]
    if exact:
        return exact[0]
    of_calibration = [m for m in runs if m.calibration_id == ref]
    if of_calibration:
        return of_calibration[-1]
    raise TokenLensError(f"{runs_dir(store)}: no run or calibration {ref!r}")


def start_run(
    config: CalibrationConfig,
    calibration_id: str,
    *,
    fresh_sample: bool = False,
    flow_run_id: str | None = None,
    now: datetime | None = None,
) -> RunManifest:
    """Open the run this call is: a Prefect retry of a known flow run reopens it; else new.

    The new run's seed is the config's (a plain rerun reuses every call) unless
    `fresh_sample` asks for a new one.
    """
    store = location(config.store)
    if flow_run_id is not None:
        for known in reversed(list_runs(store)):
            if known.flow_run_id == flow_run_id and known.calibration_id == calibration_id:
                return reopen_run(store, known, flow_run_id)
    seed = fresh_seed() if fresh_sample else config.seed
    manifest = RunManifest(
        run_id=new_run_id(now),
        calibration_id=calibration_id,
        seed=seed,
        fresh_sample=fresh_sample,
        created=now or datetime.now(UTC),
        flow_run_id=flow_run_id,
        pid=os.getpid(),
        host=socket.gethostname(),
        config=config.model_copy(update={"seed": seed}).model_dump(mode="json"),
    )
    previous = [m for m in list_runs(store) if m.calibration_id == calibration_id]
    write_manifest(store, manifest)
    if previous:
        _reuse_compressions(store, previous[-1].run_id, manifest.run_id)
    return manifest


def reopen_run(store: Where, manifest: RunManifest, flow_run_id: str | None = None) -> RunManifest:
    """Mark a run running again (resume) in this process and flow run; its seed, config
    and tables are kept."""
    reopened = manifest.model_copy(
        update={
            "status": "running",
            "finished": None,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "flow_run_id": flow_run_id or manifest.flow_run_id,
            "attempts": manifest.attempts + 1,
        }
    )
    write_manifest(store, reopened)
    return reopened


def finish_run(store: Where, manifest: RunManifest, status: RunStatus) -> RunManifest:
    done = manifest.model_copy(update={"status": status, "finished": datetime.now(UTC)})
    write_manifest(store, done)
    return done


def _reuse_compressions(store: Location, source: str, target: str) -> None:
    """Seed a new run with the compressed bodies of the calibration's previous run.

    The compress stage reuses a stored body by its content key, so this only saves the
    work (LLMLingua-2 costs seconds per prompt); a stale body never matches its key.
    """
    try:
        data = runs_dir(store).child(source, "compressions.parquet").read_bytes()
    except FileNotFoundError:
        return
    runs_dir(store).child(target, "compressions.parquet").write_bytes(data)

